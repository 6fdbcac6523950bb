"""The worker's event loop: ``async def`` jobs run as tasks on one loop per worker process, many at once.

A runner thread runs one job at a time; a coroutine mostly waits, so one
thread (this one) runs up to ``--async-concurrency`` of them at once
(docs/async.md, decision 0015). The main loop hands over the coroutine jobs it
claimed (:meth:`CoroutineLane.submit`) and reads their outcomes from the same
outbox the runners fill: recording stays where it was, on the main loop.

Jobs beyond the bound wait here, in claim order, until a task ends; they are
claimed, so the heartbeat keeps their leases, and a shutdown gives them
back unstarted like a runner's inbox. What the main loop decides about a
running attempt it tells the lane: a time limit or an operator's cancel
cancels the task (the coroutine sees ``CancelledError`` at its next await),
the end of a shutdown's grace period cancels them all. Their outcomes then
arrive as for an abandoned thread and are dropped. A coroutine that blocks
the loop is named in the log by the watch (worker/loop_watch.py).

Django's rules hold on this loop: the ORM's async methods (``aget``,
``asave``...) and ``sync_to_async`` reach the database from a thread of
Django's; a plain ORM call raises ``SynchronousOnlyOperation``.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import queue
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from django_jobretry import signals
from django_jobretry.conf import jobretry_settings
from django_jobretry.context import reset_current_job, set_current_job
from django_jobretry.jobs import middleware, progress, tracing
from django_jobretry.jobs.claim import Claims
from django_jobretry.jobs.claimed import AttemptKey, ClaimedJob, Failed, Succeeded
from django_jobretry.jobs.events import JOB_LINE, job_line_args, log_extra, send_job_signal
from django_jobretry.registry import registry, time_limit
from django_jobretry.signatures import mismatch
from django_jobretry.worker.lifecycle import WorkerOptions
from django_jobretry.worker.loop_watch import LoopWatch
from django_jobretry.worker.runner import (
    classified,
    failed,
    job_context,
    stale_arguments,
    succeeded,
    unknown_task,
)
from django_jobretry.worker.time_limits import TimeLimits

logger = logging.getLogger("django_jobretry")

#: Seconds between the loop's tidying of Django's connections (those ``sync_to_async`` calls use).
TIDY_EVERY = 1.0


def coroutine_tasks() -> frozenset[str]:
    """The registered tasks whose function is ``async def``: the ones the event loop runs."""
    return frozenset(
        name
        for name in registry.names()
        if (definition := registry.get(name)) is not None and inspect.iscoroutinefunction(definition.func)
    )


class CoroutineClaim:
    """When the main loop claims jobs for the event loop alone, after its ordinary claim, and how many.

    The ordinary claim serves the runner threads and brings jobs of either
    kind. When it found fewer jobs than it asked for, it saw every due job:
    a claim of coroutine jobs would find none. Otherwise one is made when the
    loop has room and there is a reason to look: the ordinary claim brought
    a coroutine job, the last such claim found all it asked for (the first
    pass counts as such), or the threads are all busy, so the ordinary claim
    did not look, and a poll is due. A coroutine job behind plain ones in
    claim order is brought by a later ordinary claim. So a worker whose
    queues hold only plain jobs pays for it once at start, and once per
    poll interval while its threads are all busy; never once per job.
    """

    def __init__(self, lane: CoroutineLane, claims: Claims, options: WorkerOptions) -> None:
        self.lane, self.claims, self.options = lane, claims, options
        self.found_all = True  # the last claim of coroutine jobs found as many as it asked for

    def after(
        self, asked: int, got: Sequence[ClaimedJob], claimed_total: int, *, polled: bool
    ) -> list[ClaimedJob]:
        """The ordinary claim asked for ``asked`` jobs and ``got`` these: claim coroutine jobs too?"""
        if asked and len(got) < asked:
            return []
        brought = any(job.task_name in self.lane.task_names for job in got)
        if not (brought or self.found_all or (polled and not asked)):
            return []
        size = self.options.coroutine_claim_size(self.lane.room(), claimed_total)
        if not size:
            return []
        jobs = self.claims.claim_tasks(size, self.lane.task_names)
        self.found_all = len(jobs) == size
        return jobs


class CoroutineLane(threading.Thread):
    """One event loop running up to ``limit`` coroutine jobs; their outcomes go to ``outbox``."""

    def __init__(
        self,
        limit: int,
        task_names: frozenset[str],
        *,
        outbox: queue.Queue[Succeeded | Failed],
        wake: threading.Event,
        sender: type,
        time_limits: TimeLimits,
    ) -> None:
        super().__init__(name="jobretry-event-loop", daemon=True)
        self.limit, self.outbox, self.wake, self.sender = limit, outbox, wake, sender
        #: The tasks it runs; the main loop hands it their jobs, claims them when it has room.
        self.task_names = task_names
        self.time_limits = time_limits
        self.loop = asyncio.new_event_loop()
        # Plain middleware around coroutines run here (jobs/middleware.py), one thread per attempt in flight.
        self.executor = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="jobretry-middleware")
        self.lock = threading.Condition()
        self.started = 0  # tasks created or about to be; under lock
        self.waiting: collections.deque[ClaimedJob] = collections.deque()  # under lock
        self.tasks: dict[AttemptKey, asyncio.Task[Succeeded | Failed]] = {}  # on the loop's thread only
        self.watch = LoopWatch(self.loop, self.tasks)

    # -- from the main loop ---------------------------------------------------------

    def submit(self, job: ClaimedJob) -> None:
        """Run ``job`` now if the bound allows, else when a task ends."""
        with self.lock:
            if self.started >= self.limit:
                self.waiting.append(job)
                return
            self.started += 1
        self.loop.call_soon_threadsafe(self._start, job)

    def cancel(self, key: AttemptKey) -> None:
        """The attempt was ended (time limit, cancel): cancel its task, or drop it if still waiting."""
        with self.lock:
            for job in self.waiting:
                if job.key == key:
                    self.waiting.remove(job)
                    self._put(failed(job, asyncio.CancelledError()))  # dropped: its end is recorded
                    return
        self.loop.call_soon_threadsafe(self._cancel, key)

    def room(self) -> int:
        """How many more coroutine jobs may start now; jobs waiting for a slot take room too."""
        with self.lock:
            return max(self.limit - self.started - len(self.waiting), 0)

    def keys(self) -> list[AttemptKey]:
        """The attempts running or waiting here (read from the main loop: copies under the lock)."""
        with self.lock:
            return [*list(self.tasks), *(job.key for job in self.waiting)]

    def waiting_count(self) -> int:
        with self.lock:
            return len(self.waiting)

    def take_unstarted(self) -> list[ClaimedJob]:
        """The jobs still waiting for a slot, which no task will start now (a shutdown gives them back)."""
        with self.lock:
            jobs = list(self.waiting)
            self.waiting.clear()
        return jobs

    def interrupt(self) -> None:
        """The grace period is over: cancel every task."""
        self.loop.call_soon_threadsafe(lambda: [task.cancel() for task in self.tasks.values()])

    def wait_idle(self, timeout: float) -> bool:
        """Whether every task ended within ``timeout`` seconds."""
        with self.lock:
            return self.lock.wait_for(lambda: self.started == 0, timeout)

    def stop(self) -> None:
        """Stop the loop and the watch; tasks that ignored their cancel are dropped with the process."""
        self.watch.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.executor.shutdown(wait=False, cancel_futures=True)

    # -- on the loop's thread ---------------------------------------------------------

    def run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.watch.start()
        tidy = self.loop.create_task(self._tidy())
        try:
            self.loop.run_forever()
        finally:
            tidy.cancel()
            self.loop.run_until_complete(asyncio.gather(tidy, return_exceptions=True))
            self.loop.close()

    def _start(self, job: ClaimedJob) -> None:
        task = self.loop.create_task(self._run(job), name=f"jobretry-job-{job.id}")
        self.tasks[job.key] = task
        # A callback, not a finally in the coroutine: a task cancelled before its first step never runs it.
        task.add_done_callback(lambda done: self._ended(job, done))

    def _cancel(self, key: AttemptKey) -> None:
        task = self.tasks.get(key)
        if task is not None:
            task.cancel()

    def _ended(self, job: ClaimedJob, task: asyncio.Task[Succeeded | Failed]) -> None:
        """A task ended: its slot goes to the next job waiting, its outcome to the main loop."""
        del self.tasks[job.key]
        with self.lock:
            follower = self.waiting.popleft() if self.waiting else None
            if follower is None:
                self.started -= 1
                self.lock.notify_all()
        if follower is not None:
            self._start(follower)
        if task.cancelled():  # before its first step, or while Django's thread sent job_started
            self._put(failed(job, asyncio.CancelledError()))
        elif (error := task.exception()) is not None:  # outside the attempt's own try: never lose the job
            self._put(failed(job, error))
        else:
            self._put(task.result())

    async def _run(self, job: ClaimedJob) -> Succeeded | Failed:
        """Runner.execute and runner._handle for a coroutine: the same outcomes, awaited on this loop."""
        logger.debug(f"{JOB_LINE} started", *job_line_args(job), extra=log_extra(job, "started"))
        # Receivers may use the ORM, which this loop's thread must not: Django's thread runs them.
        await sync_to_async(send_job_signal)(self.sender, signals.job_started, job)
        self.time_limits.started(job, time_limit(job.task_name, job.policy_name))
        try:
            return await tracing.attempt_async(job, lambda: self._handle(job), classified)
        finally:
            self.time_limits.returned(job)

    async def _handle(self, job: ClaimedJob) -> Succeeded | Failed:
        definition = registry.get(job.task_name)
        if definition is None:
            return unknown_task(job)
        context = job_context(job)
        token = set_current_job(context)  # this task's own context: no other coroutine sees it
        reporting = progress.begin(job)
        try:
            args, kwargs = job.arguments()
            why = mismatch(definition.func, args, kwargs, takes_context=definition.takes_context)
            if why is not None:
                return stale_arguments(job, why)
            chain = jobretry_settings.middleware
            value = await middleware.acall(
                chain, context, lambda: definition.func(*args, **kwargs), self.executor
            )
            return succeeded(job, value)
        except BaseException as error:  # CancelledError too: the main loop ended the attempt, or it is one
            return failed(job, error)
        finally:
            await progress.aend(reporting)  # the last value, written before the outcome is recorded
            reset_current_job(token)

    async def _tidy(self) -> None:
        """Close Django's connections that are broken or too old, in the thread that uses them."""
        while True:
            await asyncio.sleep(TIDY_EVERY)
            await sync_to_async(close_old_connections)()

    def _put(self, outcome: Succeeded | Failed) -> None:
        self.outbox.put(outcome)
        self.wake.set()
