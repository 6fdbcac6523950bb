"""Test jobs that return values (docs/results.md): kept by the task, by its policy, or not at all."""

from __future__ import annotations

import os
from decimal import Decimal

from django_jobretry import FatalError, RetryPolicy, job
from tests.jobs_app.models import Execution

#: A policy that keeps the results of its jobs, inline so that no settings change is needed.
KEEPING = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05, jitter=0, keep_result=True)


def _runs(key: str) -> int:
    """Records a run of ``key``; how many there were, this one included."""
    Execution.objects.create(key=key, attempt=1, pid=os.getpid())
    return Execution.objects.filter(key=key).count()


@job(policy="three", keep_result=True)
def total(prices: list[int]) -> dict[str, int]:
    """An order's total: kept for the view that asked for it."""
    _runs("total")
    return {"total": sum(prices), "items": len(prices)}


@job(policy="three")
def total_not_kept(prices: list[int]) -> dict[str, int]:
    """The same value, from a task that keeps none."""
    _runs("total_not_kept")
    return {"total": sum(prices), "items": len(prices)}


@job(policy="three", keep_result=True)
def nothing() -> None:
    """Returns None, kept as JSON null: a result, not the lack of one."""


@job(policy="three", keep_result=True)
def text_of(size: int) -> str:
    """A string of ``size`` bytes: past MAX_ARGS_BYTES as JSON it cannot be kept."""
    _runs("text_of")
    return "x" * size


@job(policy="three", keep_result=True)
def price() -> Decimal:
    """A Decimal, which JSON has no form for."""
    _runs("price")
    return Decimal("9.99")


@job(policy=KEEPING)
def kept_by_policy(value: int) -> int:
    return value * 2


@job(policy=KEEPING, keep_result=False)
def refused_by_task(value: int) -> int:
    """The task's own keep_result=False wins over its policy's."""
    return value * 2


@job(policy="three", keep_result=True)
def fatal_once(key: str) -> str:
    """Dies on its first run; requeued, it succeeds and keeps its value."""
    if _runs(key) == 1:
        raise FatalError(f"{key}: not yet")
    return f"{key} done"
