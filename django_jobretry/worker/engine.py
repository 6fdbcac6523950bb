"""The worker: a loop that claims due jobs, hands them to runner threads and records outcomes.

Threads: the main loop (claim, record, recover), N runners (user code only),
with ``async def`` jobs an event loop running them many at once (worker/event_loop.py),
a heartbeat thread, a LISTEN thread and, with schedules, a scheduler thread
(which only inserts runs; a heartbeat duty starts it: schedules/runs.py).
Only the main loop and the heartbeat write job state, on connections with
worker timeouts.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections.abc import Sequence

from django.db import DatabaseError, InterfaceError

from django_jobretry.conf import jobretry_settings
from django_jobretry.jobs import recovery
from django_jobretry.jobs.claim import Claims, ClaimSchedule
from django_jobretry.jobs.claimed import AttemptKey, ClaimedJob, Failed, FailedAttempt, Succeeded
from django_jobretry.jobs.record import Recorder
from django_jobretry.worker import lifecycle, watchdog
from django_jobretry.worker.child import PoolOptions
from django_jobretry.worker.event_loop import CoroutineClaim, CoroutineLane, coroutine_tasks
from django_jobretry.worker.heartbeat import GOODBYE_SECONDS, Heartbeat, registration
from django_jobretry.worker.lifecycle import (
    DRAIN_MARGIN,
    EXIT_UNRECORDED,
    Shift,
    StartUp,
    WorkerOptions,
    drain,
    install_stop_handlers,
)
from django_jobretry.worker.process_pool import ChildSlot
from django_jobretry.worker.runner import Runner
from django_jobretry.worker.session import (
    Backoff,
    Listener,
    drop_connection,
    log_back,
    mark_bookkeeping_thread,
    pause_after,
    unmark_bookkeeping_thread,
)
from django_jobretry.worker.time_limits import TimeLimits

logger = logging.getLogger("django_jobretry")


class Worker:
    """Runs jobs until stopped (SIGTERM/SIGINT or ``stop()``), burst-empty or max_jobs."""

    def __init__(self, options: WorkerOptions | None = None) -> None:
        self.options = options or WorkerOptions()
        host = socket.gethostname()
        self.id = f"{host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease = self.options.lease_seconds or jobretry_settings.lease_seconds
        self.registration = registration(self.id, host, self.options, self.lease)  # the workers table
        self.heartbeat_every = jobretry_settings.heartbeat_every(self.lease)
        self.grace = (
            jobretry_settings.shutdown_timeout_seconds
            if self.options.shutdown_timeout is None
            else self.options.shutdown_timeout
        )
        self.stopping = threading.Event()
        self.grace_ends: float | None = None  # time.monotonic() when the drain's grace period is over
        self.backoff = Backoff()  # the main loop's: failing_since says whether the database fails now
        self.heartbeat_stop = threading.Event()
        self.wake = threading.Event()
        self.inbox: queue.Queue[ClaimedJob | None] = queue.Queue()
        self.outbox: queue.Queue[Succeeded | Failed] = queue.Queue()
        self.running: dict[AttemptKey, ClaimedJob] = {}  # claimed, outcome not yet recorded
        # Outcomes taken from the outbox, kept until recorded (across a reconnect).
        self.succeeded: list[Succeeded] = []
        self.failed: list[FailedAttempt] = []  # decided to die, or to be decided under the row lock
        self.retrying: list[FailedAttempt] = []  # decided as retries, written with the next claim
        self.recorder = Recorder(self.id, type(self))
        self.claims = Claims(self.id, self.lease, self.options.queues, self.recorder)
        self.slots: list[ChildSlot] = []
        self.time_limits = TimeLimits(self.running, self.recorder, self.slots)
        self.lane = self._lane()
        self.coroutine_claim = (
            None if self.lane is None else CoroutineClaim(self.lane, self.claims, self.options)
        )
        self.on_loop: set[AttemptKey] = set()  # the attempts handed to the lane, until they leave running
        self.cancel_requests: dict[int, str] = {}  # job id -> who; from the heartbeat thread
        self.claimed_total = self.finished_total = 0  # attempts claimed; attempts ended
        # The last claim rode on a statement recording a flow step's success: it cannot see a step that
        # success made ready. Successes outside flows make nothing ready, so they leave it False.
        self.claimed_blind = False
        self._last_recovery = 0.0

    # -- lifecycle -------------------------------------------------------------------

    def stop(self) -> None:
        """Graceful stop: no more claims, running jobs finish within the grace period, counted from now.

        Called in a signal handler too: nothing here takes a lock.
        """
        if self.grace_ends is None:
            self.grace_ends = time.monotonic() + self.grace
            watchdog.give_up_at(self.grace_ends + DRAIN_MARGIN)  # a round trip waiting now included
        self.stopping.set()
        self.wake.set()

    def run(self) -> int:
        """Run until done; returns the process exit code: 0, or EXIT_UNRECORDED (worker/lifecycle.py)."""
        install_stop_handlers(self.stop, self.stopping, lambda: len(self.running), self.id)
        if StartUp.stop_requested:
            logger.info("stop requested while starting: exiting before claiming anything")
            return 0
        watchdog.start(self.id)
        mark_bookkeeping_thread()
        left: list[int] = []
        threads: list[threading.Thread] = [self._runner(i) for i in range(self.options.concurrency)]
        if self.lane is not None:
            threads.append(self.lane)
        heartbeat = Heartbeat(
            worker_id=self.id,
            running=self.time_limits.alive,
            on_cancel=self._cancel_requested,
            lease_seconds=self.lease,
            every=self.heartbeat_every,
            stop=self.heartbeat_stop,
            shift=Shift(self.registration, self.options, self.stopping),
        )
        threads.append(heartbeat)
        if self.options.listen:
            threads.append(Listener(self.wake, self.stopping, self.options.queues))
        for thread in threads:
            thread.start()
        lifecycle.started(self.id, self.options)
        try:
            self._loop()
            if self.grace_ends is None:  # burst or max_jobs: no signal started the grace period
                self.grace_ends = time.monotonic() + self.grace
            left = drain(self, self.grace_ends)
        finally:
            self.stopping.set()
            self.heartbeat_stop.set()
            for _ in range(self.options.concurrency):
                self.inbox.put(None)
            if self.lane is not None:
                self.lane.stop()
            unmark_bookkeeping_thread()
            drop_connection()
            # It removes the worker's row as it stops; not past the grace period and its margin.
            last = (self.grace_ends or time.monotonic()) + DRAIN_MARGIN + watchdog.LAST_CALL + 0.5
            heartbeat.join(timeout=min(GOODBYE_SECONDS, max(last - time.monotonic(), 0)))
            watchdog.stop()
        lifecycle.stopped(self.id, self.finished_total)
        return EXIT_UNRECORDED if left else 0

    def _runner(self, index: int) -> Runner:
        """A runner thread; in the process pool it hands its jobs to a child process of its own."""
        runner = functools.partial(Runner, index, inbox=self.inbox, outbox=self.outbox, wake=self.wake)
        if self.options.pool == "thread":
            return runner(sender=type(self), time_limits=self.time_limits)
        slot = ChildSlot(PoolOptions(self.options.max_jobs_per_child, self.options.max_memory_mb))
        self.slots.append(slot)
        return runner(sender=type(self), executor=slot.execute, close=lambda: slot.stop(kill=False))

    def _lane(self) -> CoroutineLane | None:
        """The event loop for ``async def`` jobs: in the thread pool, when any is registered and allowed."""
        tasks = coroutine_tasks()
        if self.options.pool != "thread" or not self.options.async_concurrency or not tasks:
            return None
        lane = CoroutineLane(
            self.options.async_concurrency,
            tasks,
            outbox=self.outbox,
            wake=self.wake,
            sender=type(self),
            time_limits=self.time_limits,
        )
        self.time_limits.lane = lane
        return lane

    def _cancel_requested(self, job_id: int, actor: str) -> None:
        self.cancel_requests[job_id] = actor
        self.wake.set()

    # -- main loop ---------------------------------------------------------------------

    def _loop(self) -> None:
        backoff = self.backoff
        schedule = ClaimSchedule(jobretry_settings.poll_seconds, self.recorder.retries_due)
        woken = True
        while not self.stopping.is_set():
            self.wake.clear()
            claimed: int | None = None  # None: no claim was due this round
            try:
                self._take_outcomes()
                self.time_limits.end_overdue()
                self.time_limits.end_cancelled(self.cancel_requests)
                self._maybe_recover()
                # Claim when woken or when due (jobs/claim.py ClaimSchedule); waking only
                # to recover leases does not claim. The claim rides on the statement
                # that records the successes, if any.
                started = time.monotonic()
                polled = schedule.due(started)
                claimed = self._record_successes(claim=woken or polled, polled=polled)
                if woken or polled:
                    schedule.claimed(started)
                log_back(backoff.succeeded(), self.id, "the main loop")
            except (DatabaseError, InterfaceError) as exc:  # never fatal: wait, reconnect if needed, go on
                self.stopping.wait(pause_after(exc, backoff, self.id))
                woken = True
                continue
            if self._finished(claimed):
                return
            if claimed or (self.options.burst and self.claimed_blind):
                woken = True
                continue
            next_recovery = self._last_recovery + self.options.recover_every
            next_claim = schedule.next_at()
            next_due = self.time_limits.next_due() or next_claim
            woken = self.wake.wait(max(min(next_claim, next_recovery, next_due) - time.monotonic(), 0))

    def _finished(self, claimed: int | None) -> bool:
        idle = not self.running and not self.unrecorded() and self.outbox.empty()
        if self.options.max_jobs is not None and self.claimed_total >= self.options.max_jobs and idle:
            return True
        # A claim that saw nothing proves the queues empty only when it recorded no success: a success
        # makes a waiting flow step ready in the same statement, after the claim's snapshot was taken.
        return self.options.burst and claimed == 0 and idle and not self.claimed_blind

    def unrecorded(self) -> bool:
        return bool(self.succeeded or self.failed or self.retrying)

    def unrecorded_jobs(self) -> list[ClaimedJob]:
        """The jobs whose outcome is known here and not written yet."""
        return [o.job for o in self.succeeded] + [a.job for a in [*self.failed, *self.retrying]]

    def record_outcomes(self) -> None:
        """Record every finished attempt now, claiming nothing (the shutdown drain)."""
        self._take_outcomes()
        self._record_successes(claim=False)

    def _take_outcomes(self) -> None:
        """Take what the runners finished; failures other than retries are written now.

        Successes and retries wait for :meth:`_record_successes`, out of ``running``:
        their slot is free, and a late cancel or time limit must not end them.
        """
        while True:
            try:
                outcome = self.outbox.get_nowait()
            except queue.Empty:
                break
            if self.time_limits.release_if_abandoned(outcome.job):
                continue
            if isinstance(outcome, Succeeded):
                self.succeeded.append(outcome)
                self.running.pop(outcome.job.key, None)
            else:
                self._take_failure(outcome)
        while self.failed:  # each leaves the list once written, so a database error keeps the rest
            self.recorder.record_failures(self.failed[:1])
            self._forget([self.failed.pop(0).job])

    def _take_failure(self, outcome: Failed) -> None:
        """A retry already decided waits for the next claim's statement; the rest is written now."""
        attempt = self.recorder.failed(outcome)
        if attempt.retry is None or attempt.counted:  # a breaker counts in the failure's own transaction
            self.failed.append(attempt)
            return
        self.retrying.append(attempt)
        self._forget([attempt.job])

    def _record_successes(self, *, claim: bool, polled: bool = False) -> int | None:
        """All successes and retries in one statement; with ``claim``, the next jobs are claimed in it too.

        One round trip per job at ``--concurrency 1``. Returns how many jobs
        were claimed, None when no claim was due.
        """
        self.on_loop.intersection_update(self.running)
        in_threads = len(self.running) - len(self.on_loop)
        if self.lane is not None:  # jobs waiting for the lane's room take threads' room: they stay few
            in_threads += self.lane.waiting_count()
        free = self.options.claim_size(in_threads, self.claimed_total) if claim else 0
        self.claimed_blind = claim and any(o.job.flow_step_id is not None for o in self.succeeded)
        before = self.claimed_total
        got: list[ClaimedJob] = []
        for jobs in self.claims.claim(free, self.succeeded, self.retrying):
            # The first batch's statement wrote the outcomes; a later one may fail: these are ours.
            self._forget([outcome.job for outcome in self.succeeded])
            self.succeeded, self.retrying = [], []
            self._start(jobs)
            got += jobs
        if claim and self.coroutine_claim is not None:
            self._start(self.coroutine_claim.after(free, got, self.claimed_total, polled=polled))
        return self.claimed_total - before if claim else None

    def _start(self, claimed: list[ClaimedJob]) -> None:
        for job in claimed:
            self.running[job.key] = job
            if self.lane is not None and job.task_name in self.lane.task_names:
                self.on_loop.add(job.key)
                self.lane.submit(job)
            else:
                self.inbox.put(job)
        self.claimed_total += len(claimed)

    def _forget(self, jobs: Sequence[ClaimedJob]) -> None:
        for job in jobs:
            self.running.pop(job.key, None)
        self.finished_total += len(jobs)

    def _maybe_recover(self) -> None:
        now = time.monotonic()
        if now - self._last_recovery < self.options.recover_every:
            return
        self._last_recovery = now
        for item in recovery.recover_expired(100, jobretry_settings.error_history_limit):
            recovery.announce(item, self.recorder.sender)
