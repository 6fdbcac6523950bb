"""Runner threads: they hand claimed jobs to a handler and report what happened.

Nothing here touches job state: the main loop records the outcome. No
transaction or row lock is held while user code runs (docs/design.md#rule-2).
In the thread pool a runner calls the handler itself (:func:`run_handler`);
in the process pool it hands the job to its child process
(worker/process_pool.py), which calls the same function.

The jobs' events are counted here too, in memory, for the metrics. A job's
start, success, retry or death is already announced by a signal after its
transition commits (docs/worker.md#signals), on whichever thread made it;
the receivers here only add one to the process's :data:`TALLY`, so the
claim and record statements stay as they are (their query budgets are
tested). The heartbeat thread writes the tally (worker/heartbeat.py) with one
statement a beat and once more at a clean exit
(console/counters.py): a worker that crashes loses at most one
heartbeat period of counts.

Receivers are connected only while a worker's heartbeat runs in this
process (reference-counted: tests run several workers in one process), so
a web process, or ``django_jobretry.testing`` running jobs inline, counts
nothing here and never holds counts no one will write. The django-q2
adapter sends the same signals from its cluster processes, where no
heartbeat runs: its events are not counted (docs/metrics.md).
"""

from __future__ import annotations

import inspect
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from django.db import close_old_connections

from django_jobretry import signals
from django_jobretry.conf import jobretry_settings, task_modules
from django_jobretry.console.counters import Tally
from django_jobretry.context import JobContext, reset_current_job, set_current_job
from django_jobretry.exceptions import StaleArguments, UnknownTask
from django_jobretry.jobs import middleware, progress, tracing
from django_jobretry.jobs.claimed import ClaimedJob, Failed, Kept, Succeeded
from django_jobretry.jobs.decisions import classify_failure, deferred
from django_jobretry.jobs.events import JOB_LINE, job_line_args, log_extra, send_job_signal
from django_jobretry.jobs.history import AttemptEnd, render_error
from django_jobretry.jobs.results import kept_result
from django_jobretry.models import CounterEvent
from django_jobretry.policy import CircuitOpen, Classification, ErrorKind, Snooze
from django_jobretry.registry import policy_for, registry, time_limit
from django_jobretry.signatures import mismatch
from django_jobretry.worker.time_limits import TimeLimits

logger = logging.getLogger("django_jobretry")

#: Runs one claimed attempt to its outcome.
Execute = Callable[[ClaimedJob], Succeeded | Failed]

#: The rule recorded when the stored arguments do not bind to the function (fatal at once).
STALE_ARGUMENTS_RULE = "the stored arguments no longer match the function's signature"


class Runner(threading.Thread):
    """Takes claimed jobs from ``inbox``, runs them, puts their outcomes in ``outbox``.

    ``executor`` runs a job elsewhere (a child process); by default the
    handler runs in this thread, its deadline noted in ``time_limits``.
    """

    def __init__(
        self,
        index: int,
        *,
        inbox: queue.Queue[ClaimedJob | None],
        outbox: queue.Queue[Succeeded | Failed],
        wake: threading.Event,
        sender: type,
        time_limits: TimeLimits | None = None,
        executor: Execute | None = None,
        close: Callable[[], object] | None = None,
    ) -> None:
        super().__init__(name=f"jobretry-runner-{index}", daemon=True)
        self.inbox, self.outbox, self.wake, self.sender = inbox, outbox, wake, sender
        self.time_limits, self.executor, self.close = time_limits, executor, close

    def run(self) -> None:
        try:
            while (job := self.inbox.get()) is not None:
                self.outbox.put(self.execute(job))
                self.wake.set()
        finally:
            if self.close is not None:
                self.close()

    def execute(self, job: ClaimedJob) -> Succeeded | Failed:
        if registry.get(job.task_name) is None:
            return unknown_task(job)
        logger.debug(f"{JOB_LINE} started", *job_line_args(job), extra=log_extra(job, "started"))
        send_job_signal(self.sender, signals.job_started, job)
        if self.executor is not None:
            return self.executor(job)
        if self.time_limits is not None:
            self.time_limits.started(job, time_limit(job.task_name, job.policy_name))
        try:
            return run_handler(job)
        finally:
            if self.time_limits is not None:
                self.time_limits.returned(job)


def classified(outcome: Failed) -> Classification:
    """The failure's classification, as the recorder would make it: once, here, for the span too."""
    return classify_failure(policy_for(outcome.job.task_name, outcome.job.policy_name), outcome)


def unknown_task(job: ClaimedJob) -> Failed:
    """The task is not registered in this worker (yet): a retryable failure, whose message says where to look.

    The likelier cause is a task defined in a module start-up does not
    import (check E015 catches most); the rarer one, a worker on older code.
    """
    error = UnknownTask(
        f"unknown task {job.task_name!r}: not registered in this worker ({len(registry.names())} tasks "
        f"are). Workers register the tasks of the modules imported at start-up: {task_modules.listing()}. "
        f"If the task is defined in another module, {task_modules.HOW_TO_ADD}. If it is defined in one "
        "of these, a rolling deploy may not have reached this worker yet."
    )
    return Failed(job, error, AttemptEnd.UNKNOWN_TASK)


def run_handler(job: ClaimedJob, *, manage_connections: bool = True) -> Succeeded | Failed:
    """Call the registered function of ``job`` with its arguments, in this thread, and say how it went.

    What it returns is kept as jobs/results.py says (``keep_result``, a flow
    step) or as a :class:`Kept` gives it (a django.tasks task's result and
    end). The call goes through ``JOBRETRY["MIDDLEWARE"]``
    (jobs/middleware.py), after the stale-arguments check. ``manage_connections=False`` leaves the thread's
    connection alone: ``django_jobretry.testing`` runs jobs inside a test's
    transaction, which closing a connection "too old to reuse" would end.
    With OpenTelemetry installed the call is inside the attempt's span
    (jobs/tracing.py), in whichever process runs it: a runner thread, a
    pool's child or ``run_jobs()``.
    """
    return tracing.attempt(job, lambda: _handle(job, manage_connections), classified)


def _handle(job: ClaimedJob, manage_connections: bool) -> Succeeded | Failed:
    definition = registry.get(job.task_name)
    if definition is None:
        return unknown_task(job)
    if manage_connections:
        close_old_connections()
    context = job_context(job)
    token = set_current_job(context)
    reporting = progress.begin(job)
    try:
        args, kwargs = job.arguments()
        # Bound before the call: a TypeError from the call itself is then the function's own.
        why = mismatch(definition.func, args, kwargs, takes_context=definition.takes_context)
        if why is not None:
            return stale_arguments(job, why)
        # Inside the try: a middleware that raises is this attempt's error, classified as the function's own.
        value = middleware.call(
            jobretry_settings.middleware, context, lambda: _call(definition.func, args, kwargs)
        )
        return succeeded(job, value)
    except BaseException as error:
        return failed(job, error)
    finally:
        progress.end(reporting)  # the last value, written before the outcome is recorded
        reset_current_job(token)
        if manage_connections:
            close_old_connections()


def job_context(job: ClaimedJob) -> JobContext:
    """What ``current_job()`` says while ``job`` runs."""
    return JobContext(
        job.id,
        job.task_name,
        job.queue_name,
        job.attempt,
        job.max_attempts,
        original_job_id=job.original_job_id,
        requeue_count=job.requeue_count,
        flow_step_id=job.flow_step_id,
    )


def succeeded(job: ClaimedJob, value: Any) -> Succeeded:
    """The attempt returned ``value``: a django.tasks result is kept, and a kept result (jobs/results.py)."""
    if isinstance(value, Kept):
        return Succeeded(job, value.result, value.finish)
    return Succeeded(job, kept_result(job, value))  # if its task, policy or flow step says so


def failed(job: ClaimedJob, error: BaseException) -> Failed:
    """The attempt raised ``error``: a snooze or open breaker gives the attempt back, the rest fail."""
    if isinstance(error, (Snooze, CircuitOpen)):  # not failures: the job gives its attempt back
        return deferred(job, error) or Failed(job, error, AttemptEnd.ERROR, render_error(error))
    if isinstance(error, Exception):
        return Failed(job, error, AttemptEnd.ERROR, render_error(error))
    # SystemExit/KeyboardInterrupt raised by the handler itself
    return Failed(job, error, AttemptEnd.WORKER_EXIT, render_error(error))


def stale_arguments(job: ClaimedJob, why: str) -> Failed:
    """The stored arguments do not fit the function, changed since the enqueue: fatal on this attempt."""
    error = StaleArguments(
        f"the stored arguments do not match {job.task_name}'s signature: {why}. The function changed "
        "since the job was enqueued; requeue the dead letter once the function takes them again, "
        "or discard it"
    )
    return Failed(job, error, AttemptEnd.ERROR, render_error(error), STALE)


#: How a job whose arguments do not fit its function is classified (:func:`stale_arguments`).
STALE = Classification(ErrorKind.FATAL, rule=STALE_ARGUMENTS_RULE)


def _call(func: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    """The function's value: a coroutine is run to its end here, so middleware see its outcome too.

    With asgiref's ``async_to_sync``, as Django's own ``Task.call`` does: what the coroutine
    runs through ``sync_to_async`` comes back to this thread and its connection (the job's,
    and in ``run_jobs`` the test's transaction), not to a thread of asgiref's.
    """
    value = func(*args, **kwargs)
    return async_to_sync(_await)(value) if inspect.isawaitable(value) else value


async def _await(awaitable: Any) -> Any:
    return await awaitable


#: This process's counts not yet written.
TALLY = Tally.empty()

_RECEIVERS = {
    signals.job_started: CounterEvent.STARTED,
    signals.job_succeeded: CounterEvent.SUCCEEDED,
    signals.job_retry_scheduled: CounterEvent.RETRIED,
    signals.job_dead_lettered: CounterEvent.DEAD,
}


def _receiver(event: CounterEvent) -> Any:
    def count(sender: type, *, task_name: str, queue_name: str, **kwargs: Any) -> None:
        TALLY.add(event, task_name, queue_name)

    return count


class _Receivers:
    """The receivers, connected while at least one heartbeat runs (signals hold receivers weakly)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.receivers = {signal: _receiver(event) for signal, event in _RECEIVERS.items()}

    def begin(self) -> None:
        with self.lock:
            self.users += 1
            if self.users == 1:
                for signal, receiver in self.receivers.items():
                    signal.connect(receiver, dispatch_uid=f"django_jobretry.counting.{id(signal)}")

    def end(self) -> None:
        with self.lock:
            self.users -= 1
            if self.users == 0:
                for signal in self.receivers:
                    signal.disconnect(dispatch_uid=f"django_jobretry.counting.{id(signal)}")


_connected = _Receivers()


def begin_counting() -> None:
    """A heartbeat starts in this process: count from now on (before its worker claims anything)."""
    _connected.begin()


def end_counting() -> None:
    """A heartbeat stopped after its last flush; the last one disconnects the receivers."""
    _connected.end()
