"""Attempts the worker ends before their handler returns: past a time limit, cancelled, or shut down.

Time limits in the thread pool are reported, not enforced by force.

A thread cannot be killed. When a handler runs past its ``timeout`` (from
``@job(timeout=...)``, else its policy's), the main loop ends the attempt as
a retryable ``timeout`` failure, so the job is retried on its policy's
schedule, and *abandons* the thread: its slot stays taken until the handler
returns on its own, and whatever it returns then is dropped. A second run
may therefore overlap the abandoned one; docs/worker.md#time-limits says so.
Everything here is kept per attempt (:data:`AttemptKey`), not per job: the
abandoned attempt 1 of a job must neither shield its attempt 2 from its own
limit nor, returning, clear that limit or take attempt 2's outcome as its own.
An operator's cancel of a running job ends its attempt the same way, as a
"cancelled" dead letter, and kills the job's child in the process pool.
What still runs when a shutdown's grace period is over ends as "shutdown".
A coroutine on the worker's event loop (worker/event_loop.py) can be
stopped: each of these ends cancels its task too, so its slot is free at its
next await.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Protocol

from django_jobretry.exceptions import JobTimeout
from django_jobretry.jobs.claimed import AttemptKey, ClaimedJob, Failed, Interrupted
from django_jobretry.jobs.events import log_extra
from django_jobretry.jobs.history import AttemptEnd, render_error
from django_jobretry.jobs.record import Recorder
from django_jobretry.jobs.recovery import bury_cancelled_attempt

logger = logging.getLogger("django_jobretry")

#: Seconds the children killed at the end of a shutdown's grace period have to be reaped.
REAP_SECONDS = 10.0


class CancellableLane(Protocol):
    """The worker's event loop as time limits use it (worker/event_loop.py's CoroutineLane)."""

    def cancel(self, key: AttemptKey) -> None:
        """Cancel the attempt's task (or drop it, not started yet)."""

    def interrupt(self) -> None:
        """Cancel every task."""

    def wait_idle(self, timeout: float) -> bool:
        """Whether every task ended within ``timeout`` seconds."""

    def keys(self) -> list[AttemptKey]:
        """The attempts it runs or holds now."""

    def take_unstarted(self) -> list[ClaimedJob]:
        """The jobs waiting for its room, which it will not start now."""


class KillableSlot(Protocol):
    """A process-pool slot as time limits use it (worker/process_pool.py's ChildSlot has these)."""

    def kill_if_running(self, job_id: int) -> None:
        """Kill the child if it runs ``job_id`` now."""

    def interrupt(self) -> None:
        """Kill the child if it runs any job now."""

    def wait_idle(self, timeout: float) -> bool:
        """Whether the slot's runner reaped its child within ``timeout`` seconds."""


class TimeLimits:
    """Deadlines of the attempts running now: runner threads set them, the main loop enforces them.

    ``running`` is the worker's own map of claimed attempts; a timed-out one
    stays in it, holding its slot, until its handler returns.
    """

    def __init__(
        self, running: dict[AttemptKey, ClaimedJob], recorder: Recorder, slots: Sequence[KillableSlot] = ()
    ) -> None:
        self.running, self.recorder = running, recorder
        #: The process pool's child slots (empty in the thread pool), to kill a cancelled job's child.
        self.slots = slots
        self._due: dict[AttemptKey, tuple[float, timedelta]] = {}
        self._lock = threading.Lock()
        #: Attempts already ended (timeout, cancel) whose thread has not returned yet.
        self.abandoned: set[AttemptKey] = set()
        #: The event loop of ``async def`` jobs, when the worker has one.
        self.lane: CancellableLane | None = None

    def started(self, job: ClaimedJob, limit: timedelta | None) -> None:
        """A runner starts the handler of ``job``; no deadline without a limit."""
        if limit is not None:
            with self._lock:
                self._due[job.key] = (time.monotonic() + limit.total_seconds(), limit)

    def returned(self, job: ClaimedJob) -> None:
        """The handler of ``job`` returned (or raised): its deadline no longer applies."""
        with self._lock:
            self._due.pop(job.key, None)

    def overdue(self) -> list[tuple[AttemptKey, timedelta]]:
        """(attempt, limit) of the attempts past their deadline and not abandoned yet, oldest first."""
        now = time.monotonic()
        with self._lock:
            late = sorted((due, key, limit) for key, (due, limit) in self._due.items() if due <= now)
        return [(key, limit) for _, key, limit in late if key not in self.abandoned]

    def next_due(self) -> float | None:
        """The monotonic time of the next deadline of an attempt not yet abandoned."""
        with self._lock:
            pending = [due for key, (due, _) in self._due.items() if key not in self.abandoned]
        return min(pending, default=None)

    def alive(self) -> list[ClaimedJob]:
        """The attempts whose lease is still the worker's: running and not timed out (one per job)."""
        return [job for job in list(self.running.values()) if job.key not in self.abandoned]

    def end_overdue(self) -> None:
        """End each attempt past its limit as a retryable "timeout"; its thread is abandoned."""
        for key, limit in self.overdue():
            job = self.running.get(key)
            if job is None:
                continue
            error = JobTimeout(
                f"job {job.id} attempt {job.attempt} ran longer than its timeout of {limit}; "
                "its thread keeps its worker slot until the handler returns, a coroutine is cancelled"
            )
            self.recorder.record_failure(Failed(job, error, AttemptEnd.TIMEOUT, render_error(error)))
            self.abandoned.add(key)
            if self.lane is not None:
                self.lane.cancel(key)

    def end_cancelled(self, requests: dict[int, str]) -> None:
        """End each running attempt an operator asked to cancel (``requests``: job id -> who)."""
        alive = {job.id: job for job in self.alive()}
        for job_id in list(requests):
            actor = requests.pop(job_id)
            job = alive.get(job_id)
            if job is None:
                continue
            worker_id, sender = self.recorder.worker_id, self.recorder.sender
            if bury_cancelled_attempt(job, actor, worker_id=worker_id, sender=sender) is None:
                continue  # the lease was lost meanwhile: the outcome will be stale anyway
            self.abandoned.add(job.key)
            for slot in self.slots:
                slot.kill_if_running(job_id)
            if self.lane is not None:
                self.lane.cancel(job.key)

    def end_at_shutdown(self, lease: float) -> None:
        """The grace period is over: end every attempt still running as "shutdown".

        The process pool kills the children still running a job and waits until
        their runners have reaped them (and ended their database sessions): the
        runs are over, so the jobs are ready again at once. A thread cannot be
        stopped: it runs until this process exits, right after, so its job waits
        one lease before another worker may start it. Either way the two runs of
        a job never overlap. The event loop's tasks are cancelled, and their jobs
        are ready at once if every task ended by the same deadline.
        """
        on_loop = set(self.lane.keys()) if self.lane is not None else set()
        for slot in self.slots:
            slot.interrupt()
        if self.lane is not None:
            self.lane.interrupt()
        deadline = time.monotonic() + REAP_SECONDS
        reaped = all(slot.wait_idle(max(deadline - time.monotonic(), 0)) for slot in self.slots)
        loop_idle = self.lane is not None and self.lane.wait_idle(max(deadline - time.monotonic(), 0))
        for job in self.alive():
            stopped = (bool(self.slots) and reaped) or (job.key in on_loop and loop_idle)
            hold = timedelta(0) if stopped else timedelta(seconds=lease)
            self.recorder.record_failure(Interrupted(job, hold=hold))
            self.running.pop(job.key, None)

    def release_if_abandoned(self, job: ClaimedJob) -> bool:
        """If ``job`` timed out earlier, its handler has now returned: free the slot, drop the outcome."""
        if job.key not in self.abandoned:
            return False
        self.abandoned.discard(job.key)
        self.running.pop(job.key, None)
        logger.info(
            "job %s attempt %s returned after its timeout; outcome ignored",
            job.id,
            job.attempt,
            extra=log_extra(job, "returned_after_timeout"),
        )
        return True
