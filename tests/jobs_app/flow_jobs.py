"""Tasks for workflow tests: each run is recorded (Execution), and each step returns its key."""

from __future__ import annotations

from typing import Any

from django_jobretry import FatalError, job
from django_jobretry.flows import parent_results
from tests.jobs_app.models import Execution


def _run(key: str) -> str:
    Execution.objects.create(key=key, attempt=0, pid=0)
    return key


@job(policy="three")
def step(key: str) -> str:
    """Succeeds, returning its key."""
    return _run(key)


@job(policy="three")
def step_unless(key: str, fail: bool) -> str:
    """Fails fatally while ``fail``: a repair of its arguments makes it succeed."""
    if fail:
        raise FatalError(f"step {key} refused")
    return _run(key)


@job(policy="three")
def gather(key: str) -> dict[str, Any]:
    """Returns its parents' results (it is added with ``results=True``)."""
    _run(key)
    return parent_results()


@job(policy="three")
def unkeepable(key: str) -> object:
    """Returns a value JSON has no form for."""
    _run(key)
    return {1, 2}


@job(policy="three")
def downstream(key: str) -> str:
    """Succeeds, returning its key: a task of its own, so that a pause of it holds no other step."""
    return _run(key)
