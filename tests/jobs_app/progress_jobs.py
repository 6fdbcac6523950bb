"""Jobs that report progress (docs/progress.md), for tests/integration/progress/ and progress.feature."""

from __future__ import annotations

import os
import time
import uuid

from asgiref.sync import sync_to_async
from django.db import transaction

from django_jobretry import FatalError, aprogress, current_job, job, progress
from django_jobretry.models import Job
from tests.jobs_app.models import Execution

#: Seconds a job waits for its test to say it saw the progress, at most.
WAIT_SECONDS = 30


def _own_progress() -> int | None:
    """What the running job's row says it has done, read back in the job."""
    context = current_job()
    assert context is not None
    return Job.objects.values_list("progress_done", flat=True).get(pk=context.job_id)


def _note(key: str, what: str) -> None:
    Execution.objects.create(key=f"{key}:{what}", attempt=0, pid=os.getpid())


@job(policy="three")
def walks_rows(key: str, rows: int) -> None:
    """Reports every one of ``rows`` rows in a tight loop, as a job walking a table would, then succeeds.

    Notes how long the loop took (``key:seconds S``): the throttle allows a write a second.
    """
    started = time.monotonic()
    for done in range(1, rows + 1):
        progress(done, rows, note=f"{key}: row {done}")
    _note(key, f"seconds {time.monotonic() - started:.3f}")


@job(policy="three")
def breaks_at(key: str, done: int, total: int) -> None:
    """Gets ``done`` rows of ``total`` in, then meets a broken one: fatal, so its dead letter says how far."""
    for row in range(1, done + 1):
        progress(row, total, note=f"{key}: row {row}")
    raise FatalError(f"{key}: row {done + 1} is broken")


@job(policy="three")
def reports_then_waits(key: str, done: int, total: int, note: str) -> None:
    """Reports once, then waits until the test saw it (its Execution row ``key:seen``): visible mid-run."""
    progress(done, total, note=note)
    deadline = time.monotonic() + WAIT_SECONDS
    while not Execution.objects.filter(key=f"{key}:seen").exists() and time.monotonic() < deadline:
        time.sleep(0.01)


@job(policy="three")
def reports_inside_a_transaction(key: str) -> None:
    """Reports 1 of 3, then 2 of 3 inside its own transaction, and notes what its row said in there."""
    progress(1, 3, note="outside")
    with transaction.atomic():
        progress(2, 3, note="inside")
        _note(key, f"saw {_own_progress()}")


@job(policy="three")
def loses_its_lease(key: str, steal: bool) -> None:
    """Reports 1 of 3; its lease goes to another worker when ``steal``; then it reports 2 of 3."""
    progress(1, 3, note="before")
    if steal:  # as lease recovery and another worker's claim would: a new token on the row
        context = current_job()
        assert context is not None
        Job.objects.filter(pk=context.job_id).update(lease_token=uuid.uuid4())
    progress(2, 3, note="after")


@job(policy="three")
async def walks_rows_async(key: str, rows: int) -> None:
    """``await aprogress()`` for each row; notes what its row said after the first."""
    for done in range(1, rows + 1):
        await aprogress(done, rows, note=f"{key}: row {done}")
        if done == 1:
            await sync_to_async(_note)(key, f"saw {await sync_to_async(_own_progress)()}")


@job(policy="three")
async def awaits_rows(key: str, rows: int) -> None:
    """``await aprogress()`` for each row, and nothing else."""
    for done in range(1, rows + 1):
        await aprogress(done, rows, note=f"{key}: row {done}")


@job(policy="three")
async def reports_synchronously_in_a_loop(key: str, done: int) -> None:
    """The synchronous ``progress()`` inside an event loop: kept, no query, written at the attempt's end."""
    progress(done, note=key)
