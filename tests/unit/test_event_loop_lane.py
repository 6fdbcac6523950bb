"""The event loop's bound and bookkeeping (worker/event_loop.py), as properties over random runs.

Invariants, for any bound, number of jobs and set of cancels:
- no more coroutines run at once than the bound;
- every job handed over comes back exactly once: as an outcome, or given
  back unstarted by ``take_unstarted``;
- the lane ends idle (``wait_idle``), its room whole again.

The jobs are real ``async def`` tasks of the registry on a real loop thread;
each hops a few times so that tasks interleave. A lane that ignores its
bound (the negative control) is caught.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_jobretry import job
from django_jobretry.jobs.claimed import ClaimedJob, Failed, Succeeded
from django_jobretry.worker.event_loop import CoroutineLane
from django_jobretry.worker.time_limits import TimeLimits
from tests.declarations import forgotten_afterwards

#: Seconds any one run may take before the test fails (a lost outcome hangs otherwise).
DEADLINE = 10.0
PROPERTY = settings(max_examples=60, deadline=None, database=None, report_multiple_bugs=False)


class Gauge:
    """How many hops run now, and the most seen at once (touched on the loop's thread only)."""

    def __init__(self) -> None:
        self.now = self.peak = 0


GAUGE = Gauge()


@pytest.fixture(scope="module")
def task_name() -> Iterator[str]:
    with forgotten_afterwards():

        @job(name="tests.lane.hops")
        async def hops(times: int) -> int:
            GAUGE.now += 1
            GAUGE.peak = max(GAUGE.peak, GAUGE.now)
            try:
                for _ in range(times):
                    await asyncio.sleep(0)
            finally:
                GAUGE.now -= 1
            return times

        yield hops.name


class UnboundedLane(CoroutineLane):
    """The negative control: starts every job at once, whatever its bound."""

    def submit(self, job: ClaimedJob) -> None:
        with self.lock:
            self.started += 1
        self.loop.call_soon_threadsafe(self._start, job)


def claimed(task_name: str, index: int, times: int) -> ClaimedJob:
    return ClaimedJob(
        id=index, task_name=task_name, queue_name="default", policy_name="default",
        raw_args=[times], raw_kwargs={}, attempt=1, max_attempts=3, token=uuid.uuid4(),
        original_job_id=index, requeue_count=0,
    )  # fmt: skip


def run_lane(
    lane_class: type[CoroutineLane],
    task_name: str,
    bound: int,
    hops: list[int],
    cancels: set[int],
    *,
    give_back: bool,
) -> None:
    """Hand ``hops`` jobs to a lane of ``bound``, cancel some, maybe take back the waiting; check it all."""
    GAUGE.now = GAUGE.peak = 0
    outbox: queue.Queue[Succeeded | Failed] = queue.Queue()
    lane = lane_class(
        bound,
        frozenset({task_name}),
        outbox=outbox,
        wake=threading.Event(),
        sender=object,
        time_limits=TimeLimits({}, recorder=None),  # type: ignore[arg-type]  # no deadline is ever due
    )
    lane.start()
    try:
        jobs = [claimed(task_name, index, times) for index, times in enumerate(hops)]
        for job_ in jobs:
            lane.submit(job_)
        for index in sorted(cancels):
            lane.cancel(jobs[index].key)
        unstarted = lane.take_unstarted() if give_back else []
        returned: list[int] = [job_.id for job_ in unstarted]
        while len(returned) < len(jobs):
            returned.append(outbox.get(timeout=DEADLINE).job.id)
        assert lane.wait_idle(DEADLINE), "the lane never went idle"
    finally:
        lane.stop()
    assert sorted(returned) == list(range(len(jobs))), "a job came back twice, or never"
    assert outbox.empty()
    assert GAUGE.peak <= bound, f"{GAUGE.peak} ran at once under a bound of {bound}"
    assert lane.room() == bound


runs = st.tuples(
    st.integers(1, 6),
    st.lists(st.integers(0, 5), max_size=30),
    st.sets(st.integers(0, 29), max_size=8),
    st.booleans(),
)


@PROPERTY
@given(runs)
def test_the_lane_keeps_its_bound_and_returns_every_job_once(task_name: str, run: tuple[Any, ...]) -> None:
    bound, hops, cancels, give_back = run
    run_lane(
        CoroutineLane, task_name, bound, hops, {i for i in cancels if i < len(hops)}, give_back=give_back
    )


def test_the_negative_control_a_lane_without_its_bound_is_caught(task_name: str) -> None:
    with pytest.raises(AssertionError, match="ran at once under a bound of 2"):
        run_lane(UnboundedLane, task_name, 2, [3] * 10, set(), give_back=False)
