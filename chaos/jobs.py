"""The chaos workload. Every handler first writes its ledger row, then does its thing.

The ledger row (``chaos_attempt``) is written on the runner thread's own
connection in autocommit, not on the worker's bookkeeping connection, so an
attempt that is killed, paused or later ignored as stale still leaves proof
that it started. The invariants compare these starts with what the worker
recorded.
"""

from __future__ import annotations

import os
import signal
import time

from django.db import connection

from django_jobretry import FatalError, RetryableError, current_job, job


def ledger(*, poison: bool = False) -> int:
    """Record that this attempt started; returns the attempt number."""
    context = current_job()
    if context is None:  # called directly, outside a worker: nothing to prove
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO chaos_attempt (job_id, attempt, pid, poison) VALUES (%s, %s, %s, %s)",
            [context.job_id, context.attempt, os.getpid(), poison],
        )
    return context.attempt


@job(name="chaos.quick", policy="chaos")
def quick(key: str) -> None:
    """Most jobs: succeed at once."""
    ledger()


@job(name="chaos.flaky", policy="chaos")
def flaky(key: str, failures: int) -> None:
    """Fail retryably on the first ``failures`` attempts, then succeed."""
    if ledger() <= failures:
        raise RetryableError(f"flaky failure of {key}")


@job(name="chaos.storm", policy="chaos")
def storm(key: str, failures: int) -> None:
    """The retry storm: many at once, failing with an unclassified (retryable) error."""
    if ledger() <= failures:
        raise ConnectionResetError(f"upstream down for {key}")


@job(name="chaos.fatal", policy="chaos")
def fatal(key: str) -> None:
    """Dead at once; the operator sidecar requeues and discards these."""
    ledger()
    raise FatalError(f"payload of {key} is invalid")


@job(name="chaos.sleepy", policy="chaos")
def sleepy(key: str, seconds: float) -> None:
    """Long enough to be in flight when a fault hits."""
    ledger()
    time.sleep(seconds)


@job(name="chaos.poison", policy="poison")
def poison(key: str) -> None:
    """Kills the worker running it, every time, like a segfaulting library."""
    ledger(poison=True)
    os.kill(os.getpid(), signal.SIGKILL)
