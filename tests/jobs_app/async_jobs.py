"""``async def`` test jobs: they run on the worker's event loop (worker/event_loop.py).

Each writes a LedgerRun row when it ends, with the times (this process's
clock, read without a round trip) it started and ended awaiting, so a test
can count how many were in flight at once from the database.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import UTC, datetime, timedelta

from asgiref.sync import sync_to_async

from django_jobretry import Snooze, current_job, job
from tests.jobs_app.models import Execution, LedgerRun


def _ledger(key: str, started_at: datetime) -> None:
    context = current_job()
    job_id = context.job_id if context else 0
    LedgerRun.objects.create(
        key=key, job_id=job_id, pid=os.getpid(), started_at=started_at, ended_at=datetime.now(UTC)
    )


@job(policy="three")
async def awaits(key: str, seconds: float) -> None:
    """Awaits ``seconds``, then writes its ledger row."""
    started_at = datetime.now(UTC)
    await asyncio.sleep(seconds)
    await sync_to_async(_ledger)(key, started_at)


@job(policy="three")
def sleeps(key: str, seconds: float) -> None:
    """The control: the same in a runner thread, blocking it."""
    started_at = datetime.now(UTC)
    time.sleep(seconds)
    _ledger(key, started_at)


@job(policy="three")
async def blocks_the_loop(key: str, seconds: float) -> None:
    """Calls blocking code on the event loop: every other coroutine waits meanwhile."""
    started_at = datetime.now(UTC)
    time.sleep(seconds)  # the point of the job
    await sync_to_async(_ledger)(key, started_at)


@job(policy="three")
async def awaits_until_cancelled(key: str) -> None:
    """Records its start, then awaits for ever; records how it ended when cancelled."""
    await sync_to_async(Execution.objects.create)(key=f"{key}:started", attempt=_attempt(), pid=os.getpid())
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        await sync_to_async(Execution.objects.create)(
            key=f"{key}:cancelled", attempt=_attempt(), pid=os.getpid()
        )
        raise


@job(policy="three")
async def noop() -> None:
    """Does nothing, on the event loop."""


@job(policy="three")
async def resets(key: str) -> None:
    """The partner resets the connection (a middleware may classify it)."""
    await asyncio.sleep(0)
    raise ConnectionResetError(f"reset while serving {key}")


@job(policy="three")
async def marks_and_awaits(key: str, seconds: float) -> None:
    """Records ``KEY:started`` as it starts, then awaits ``seconds`` and writes its ledger row."""
    started_at = datetime.now(UTC)
    await sync_to_async(Execution.objects.create)(key=f"{key}:started", attempt=_attempt(), pid=os.getpid())
    await asyncio.sleep(seconds)
    await sync_to_async(_ledger)(key, started_at)


@job(policy="three", timeout=timedelta(seconds=1))
async def hangs_on_first_attempt(key: str) -> int:
    """Attempt 1 awaits past its 1 s timeout (and records its cancel); attempt 2 returns."""
    attempt = _attempt()
    if attempt == 1:
        await awaits_until_cancelled.func(key)
    return attempt


@job(policy="three", concurrency=3)
async def three_at_once(key: str, seconds: float) -> None:
    """A limited coroutine: at most three run at once across the fleet, however big the loop's room."""
    started_at = datetime.now(UTC)
    await asyncio.sleep(seconds)
    await sync_to_async(_ledger)(key, started_at)


@job(policy="three")
async def snoozes_once(key: str) -> None:
    """Snoozes on its first run (its attempt given back), returns on the next."""
    runs = await sync_to_async(_record)(key)
    if runs == 1:
        raise Snooze(0.2)


def _record(key: str) -> int:
    Execution.objects.create(key=key, attempt=_attempt(), pid=os.getpid())
    return Execution.objects.filter(key=key).count()


def _attempt() -> int:
    context = current_job()
    return context.attempt if context else 0


def max_in_flight(key: str) -> int:
    """The most runs of ``key`` whose [start, end] overlapped at one instant, from the ledger."""
    events: list[tuple[datetime, int]] = []
    for started_at, ended_at in LedgerRun.objects.filter(key=key).values_list("started_at", "ended_at"):
        assert ended_at is not None, "a ledger row is written as its job ends"
        events += [(started_at, 1), (ended_at, -1)]
    peak = now = 0
    for _, step in sorted(events, key=lambda event: (event[0], event[1])):  # an end before a start
        now += step
        peak = max(peak, now)
    return peak
