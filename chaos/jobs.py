"""The chaos workload. Every handler runs inside its ledger row: written first, closed last.

The ledger row (``chaos_attempt``) is written on the runner thread's own
connection in autocommit, not on the worker's bookkeeping connection, so an
attempt that is killed, paused or later ignored as stale still leaves proof
that it started. The invariants compare these starts with what the worker
recorded. When the handler returns or raises, the row gets its ``ended_at``:
a worker records an attempt's success or failure only after that, so an
outcome accepted while the attempt's own handler was still running must be
another (stale) handler's (chaos/stale.py).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DatabaseError, InterfaceError, connection

from django_jobretry import FatalError, RetryableError, current_job, job


@contextmanager
def ledger(*, poison: bool = False, step: str | None = None) -> Iterator[int]:
    """Record that this attempt started, and when its handler ended; yields the attempt number.

    A flow step's row also names its step twice: by the job's context (``flow_step_id``, what the
    worker claimed) and by ``step``, the label its arguments carry, so a run of the wrong step shows.
    """
    context = current_job()
    if context is None:  # called directly, outside a worker: nothing to prove
        yield 0
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO chaos_attempt (job_id, attempt, pid, poison, flow_step_id, step) "
            "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            [context.job_id, context.attempt, os.getpid(), poison, context.flow_step_id, step],
        )
        row_id = cursor.fetchone()[0]
    try:
        yield context.attempt
    finally:
        _ended(row_id)


def _ended(row_id: int) -> None:
    """Close the ledger row; a fault that broke the session leaves ``ended_at`` NULL (not checked).

    Never raises: the handler's own return or exception is what the worker must see.
    """
    try:
        with connection.cursor() as cursor:
            cursor.execute("UPDATE chaos_attempt SET ended_at = clock_timestamp() WHERE id = %s", [row_id])
    except (DatabaseError, InterfaceError):
        return


@job(name="chaos.quick", policy="chaos")
def quick(key: str) -> None:
    """Most jobs: succeed at once."""
    with ledger():
        pass


@job(name="chaos.flaky", policy="chaos")
def flaky(key: str, failures: int) -> None:
    """Fail retryably on the first ``failures`` attempts, then succeed."""
    with ledger() as attempt:
        if attempt <= failures:
            raise RetryableError(f"flaky failure of {key}")


@job(name="chaos.storm", policy="chaos")
def storm(key: str, failures: int) -> None:
    """The retry storm: many at once, failing with an unclassified (retryable) error."""
    with ledger() as attempt:
        if attempt <= failures:
            raise ConnectionResetError(f"upstream down for {key}")


@job(name="chaos.fatal", policy="chaos")
def fatal(key: str) -> None:
    """Dead at once; the operator sidecar requeues and discards these."""
    with ledger():
        raise FatalError(f"payload of {key} is invalid")


@job(name="chaos.sleepy", policy="chaos")
def sleepy(key: str, seconds: float) -> None:
    """Long enough to be in flight when a fault hits."""
    with ledger():
        time.sleep(seconds)


@job(name="chaos.flow_step", policy="chaos")
def flow_step(flow: str, step: str, seconds: float, failures: int) -> None:
    """A step or callback of a chaos flow (chaos/flows.py): in flight long enough for a SIGKILL to hit it,
    failing retryably on its first ``failures`` attempts (a retry must not advance the flow)."""
    with ledger(step=f"{flow}:{step}") as attempt:
        time.sleep(seconds)
        if attempt <= failures:
            raise RetryableError(f"flaky step {step} of {flow}")


@job(name="chaos.poison", policy="poison")
def poison(key: str) -> None:
    """Kills the worker running it, every time, like a segfaulting library."""
    with ledger(poison=True):
        os.kill(os.getpid(), signal.SIGKILL)


@job(name="chaos.stubborn", policy="chaos", queue_name="stubborn")
def stubborn(key: str, seconds: float) -> None:
    """First attempt: ignore SIGTERM, then sleep; a process-pool worker asked to stop must kill it."""
    with ledger() as attempt:
        if attempt == 1:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(seconds)
