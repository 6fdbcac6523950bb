"""Tasks declared with JobRetryBackend's per-task options: Django 6.1's ``@task(policy=..., ...)``.

Workers import this module at start-up through ``JOBRETRY["TASK_MODULES"]``
(tests/settings.py, Django 6.1+ only), as a project lists a module that is
no app's ``tasks.py``. Each task records an Execution row first, like
tests/jobs_app/tasks.py, so tests count real runs. No task here declares a
limit: one declared at start-up would change how every worker of the test
run claims. The undecorated functions at the end are for tests that
declare options (and limits) themselves, and forget them afterwards.
"""

from __future__ import annotations

import os
import time

from django.tasks import TaskContext, task

from django_jobretry.backends import retry_policy
from tests.jobs_app.jobs import _record
from tests.jobs_app.models import Execution

# django-stubs' task() lists only Django's own keywords: each @task below needs the ignore.


@task(policy="three")  # type: ignore[call-overload]
def dies_under_three(key: str) -> None:
    """Always fails retryably: dead after the 3 attempts of "three", whatever OPTIONS["policy"] says."""
    runs = _record(key)
    raise ConnectionResetError(f"{key} failure {runs}")


@task(policy="three")  # type: ignore[call-overload]
@retry_policy("default")
def policy_over_decorator(key: str) -> None:
    """``@task(policy=...)`` and ``@retry_policy`` both say one: the first wins."""
    _record(key)


@task(takes_context=True, timeout=0.5)  # type: ignore[call-overload]
def slow_first_attempt(context: TaskContext[..., int], key: str, seconds: float) -> int:
    """Records its attempt; the first one runs ``seconds``, past its 0.5 s time limit."""
    Execution.objects.create(key=key, attempt=context.attempt, pid=os.getpid())
    if context.attempt == 1:
        time.sleep(seconds)
    return context.attempt


@task(unique_args=("order_id",))  # type: ignore[call-overload]
def charge(order_id: int, amount: int = 0) -> int:
    """One live job per order: a second enqueue of a waiting order gets the first job."""
    _record(f"charge-{order_id}")
    return amount


@task(unique_args=("order_id",), on_conflict="raise")  # type: ignore[call-overload]
def charge_once(order_id: int, amount: int = 0) -> int:
    """One live job per order: a second enqueue is refused with JobConflict."""
    _record(f"charge-once-{order_id}")
    return amount


@task(unique_args=("order_id",), on_conflict="replace")  # type: ignore[call-overload]
def charge_latest(order_id: int, amount: int = 0) -> int:
    """One live job per order: a second enqueue gives the waiting job its arguments."""
    _record(f"charge-latest-{order_id}")
    return amount


@task(unique_key="nightly-report", unique_for=3600)  # type: ignore[call-overload]
def nightly_report(day: str) -> str:
    """One report an hour: the key stays taken for an hour after the job succeeded."""
    _record(f"report-{day}")
    return day


def per_tenant(tenant: int, key: str) -> None:
    """Not a task: tests declare it with their own options (a limit among them) and forget it after."""
    _record(key)


def never_declared(key: str) -> None:
    """Not a task: the declarations tests give it are refused, so it is never registered."""
    _record(key)
