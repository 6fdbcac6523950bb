"""Test tasks of Django's task framework, run through JobRetryBackend (Django 6+ only).

Each records an Execution row first, like tests/jobs_app/jobs.py, so tests
count real runs. Only imported when settings.TASKS uses our backend.
"""

from __future__ import annotations

import os
import time
from typing import Any

from django.tasks import TaskContext, task

from django_jobretry import FatalError
from django_jobretry.backends import retry_policy
from django_jobretry.flows import parent_results
from tests.jobs_app.jobs import _record
from tests.jobs_app.models import Execution


@task
def flaky(key: str, failures: int) -> dict[str, Any]:
    """Fails ``failures`` times, then returns what it was given."""
    runs = _record(key)
    if runs <= failures:
        raise ConnectionResetError(f"{key} failure {runs}")
    return {"key": key, "runs": runs}


@task
def always_fails(key: str) -> None:
    runs = _record(key)
    raise ConnectionResetError(f"{key} failure {runs}")


@task
def fatal(key: str) -> None:
    _record(key)
    raise FatalError(f"{key} is bad")


@task
def succeeds_when(key: str, flag: str) -> str:
    """Fails until the file ``flag`` exists: "the cause is fixed" for requeue scenarios."""
    _record(key)
    if not os.path.exists(flag):
        raise ConnectionResetError(f"{key}: {flag} does not exist yet")
    return "fixed"


@task(takes_context=True)
def attempts(context: TaskContext[..., int], key: str, failures: int) -> int:
    """Returns the attempt number its context gave it; fails ``failures`` times first."""
    Execution.objects.create(key=key, attempt=context.attempt, pid=os.getpid())
    if context.attempt <= failures:
        raise ConnectionResetError(f"{key} attempt {context.attempt}")
    return context.attempt


@task
def sleepy(key: str, seconds: float) -> str:
    _record(key)
    time.sleep(seconds)
    return key


@task
async def asynchronous(key: str) -> list[str]:
    from asgiref.sync import sync_to_async

    await sync_to_async(_record)(key)
    return [key, "async"]


@task
def returns_a_set(key: str) -> set[str]:
    _record(key)
    return {key}


@task(queue_name="other", priority=5)
def other_queue(key: str) -> str:
    _record(key)
    return key


@task
@retry_policy("default")
def decorated_policy(key: str) -> None:
    _record(key)


@task(takes_context=True)
def slow_first_attempt(context: TaskContext[..., int], key: str, seconds: float) -> int:
    """Records its attempt; the first one runs ``seconds`` (long enough to kill its worker meanwhile)."""
    Execution.objects.create(key=key, attempt=context.attempt, pid=os.getpid())
    if context.attempt == 1:
        time.sleep(seconds)
    return context.attempt


@task
def gathers(key: str) -> dict[str, Any]:
    """Returns its parents' results: a flow step added with ``results=True``."""
    _record(key)
    return parent_results()
