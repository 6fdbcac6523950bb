"""django-q2 task functions for the adapter's tests; each records an Execution row first.

Run by a real qcluster (tests/integration/django_q2/), located by
django-q2 from their dotted paths; nothing here is registered with @job.
"""

from __future__ import annotations

import os
import signal
import time

from django_jobretry import FatalError
from django_jobretry.contrib.django_q2 import retry_policy
from tests.jobs_app.models import Execution


def _record(key: str) -> int:
    Execution.objects.create(key=key, attempt=0, pid=os.getpid())
    return Execution.objects.filter(key=key).count()


def succeed(key: str) -> str:
    _record(key)
    return "ok"


def fail_then_succeed(key: str, failures: int) -> str:
    run = _record(key)
    if run <= failures:
        raise ConnectionError(f"run {run} of {key} fails")
    return "ok"


def always_fail(key: str, *, note: object = None) -> None:
    _record(key)
    raise ConnectionError(f"{key} always fails")


def fatal(key: str) -> None:
    _record(key)
    raise FatalError(f"{key}: invalid payload")


def too_slow(key: str) -> None:
    _record(key)
    time.sleep(60)


def fail_until_fixed(key: str) -> str:
    """Fails until an Execution with key ``<key>:fixed`` exists (the 'deploy' of a fix)."""
    _record(key)
    if not Execution.objects.filter(key=f"{key}:fixed").exists():
        raise ConnectionError(f"{key} is still broken")
    return "ok"


@retry_policy("q2-two")
def two_attempts(key: str) -> None:
    _record(key)
    raise ConnectionError(f"{key} fails under q2-two")


@retry_policy(None)
def opted_out(key: str) -> None:
    _record(key)
    raise ConnectionError(f"{key} fails, opted out")


def kill_own_worker(key: str) -> None:
    """Dies like an out-of-memory kill: no exception, no result, django-q2 records nothing."""
    _record(key)
    os.kill(os.getpid(), signal.SIGKILL)
