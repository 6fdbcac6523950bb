"""Our jobs of the side-by-side bench (the no-op is the test app's ``noop``); settings_ours.py."""

from __future__ import annotations

import asyncio

from bench.sidebyside.stamps import record
from django_jobretry import RetryableError, current_job, job


@job
def stamp(number: int) -> None:
    """Enqueue to start: writes when it started."""
    record(number)


@job
async def sleeps(number: int, seconds: float) -> None:
    """I/O-bound: awaits ``seconds`` (workloads.IO_SECONDS) on the worker's event loop."""
    await asyncio.sleep(seconds)


@job(policy="bench-1ms")
def fail_twice(number: int) -> None:
    """Fails retryably in its first two attempts (counted at claim), then succeeds."""
    context = current_job()
    if context is not None and context.attempt <= 2:
        raise RetryableError(f"attempt {context.attempt} of job {number} fails on purpose")
