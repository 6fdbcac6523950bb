"""A worker process's life, start to stop: its options, its first and last lines, its graceful drain.

Options. How one worker process runs is the options of `manage.py
runworker`, as a value (:class:`WorkerOptions`).

Start-up. Django imports every installed app, and each app's jobs.py (user
code, at times slow), before the runworker command runs. A SIGTERM in that
time - a rollout sends it whenever it likes - would kill the process with
-15. So in a runworker process the app installs, as early as it can,
handlers that only remember the request; the worker then exits 0 before
claiming anything (docs/worker.md#stopping-signals-and-graceful-shutdown).

A ``--queue`` that is misspelt would idle forever without a word, so a
queue no job row has and no registered task declares is named at start-up
with the nearest known names. The worker still starts: a new queue may
rightly be empty until its first job.

Shutdown. The jobs a stopping worker claimed but never started go back at
once. Waiting for their lease to expire would delay them for nothing: no
handler ran, so nothing can overlap. Releasing also uncounts the attempt
(jobs/claimed.release), since none was made.

The drain is kept to its grace period whether or not the database answers.
After SIGTERM (or at the end of ``--burst``/``--max-jobs``) the worker gives
back what it claimed but never started, lets the running jobs finish until
the grace period is over, records every outcome, and ends what still runs
as "shutdown". A database that does not answer must not stretch this: every
round trip is cut by the watchdog when the grace is over (plus
``DRAIN_MARGIN``), a failed write is tried again (with backoff) until then,
and what could still not be recorded is named in one WARNING and left to
its lease: other workers recover those jobs when it expires, as after a
crash. The worker then exits with ``EXIT_UNRECORDED``.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Literal, Protocol

from django.db import DatabaseError, InterfaceError

from django_jobretry.conf import jobretry_settings
from django_jobretry.console import workers
from django_jobretry.display import count_of, did_you_mean
from django_jobretry.jobs import claimed
from django_jobretry.jobs.claimed import AttemptKey, ClaimedJob, Failed, Succeeded
from django_jobretry.jobs.events import log_extra
from django_jobretry.models import Job
from django_jobretry.registry import registry
from django_jobretry.worker import watchdog
from django_jobretry.worker.session import RECONNECT_CAP, Backoff, drop_connection, log_database_error
from django_jobretry.worker.time_limits import TimeLimits

logger = logging.getLogger("django_jobretry")

#: The most runner threads one worker process starts. Each is a thread that may hold a database
#: connection of its own (and with ``pool="process"`` a child process): a thousand is far more
#: than one PostgreSQL serves by default (``max_connections`` 100). For more, run more processes.
#: Unbounded, ``--concurrency 1000000000`` started threads until the machine ran out of memory.
MAX_CONCURRENCY = 1000
#: Runner threads when nothing says otherwise: WorkerOptions' default and ``--concurrency``'s.
DEFAULT_CONCURRENCY = 10
#: What a concurrency may be, as every error about one says it.
CONCURRENCY_RANGE = f"an integer from 1 to {MAX_CONCURRENCY} (runner threads in one worker process)"


def valid_concurrency(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_CONCURRENCY


#: Coroutines in flight in one worker process unless ``--async-concurrency`` says otherwise.
DEFAULT_ASYNC_CONCURRENCY = 100
#: The most ``--async-concurrency`` allows: past it, one loop thread is the limit, not the bound.
MAX_ASYNC_CONCURRENCY = 10_000
#: What an async concurrency may be, as every error about one says it.
ASYNC_CONCURRENCY_RANGE = (
    f"an integer from 0 to {MAX_ASYNC_CONCURRENCY} (coroutines in flight in one worker process; "
    "0 runs them in the runner threads)"
)


def valid_async_concurrency(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_ASYNC_CONCURRENCY


@dataclass(frozen=True)
class WorkerOptions:
    """How one worker process runs; defaults come from JOBRETRY."""

    queues: Sequence[str] | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    burst: bool = False
    max_jobs: int | None = None
    lease_seconds: float | None = None
    shutdown_timeout: float | None = None
    #: LISTEN for wake-ups (a connection of its own); False: poll only. Default: JOBRETRY["LISTEN"].
    listen: bool = field(default_factory=lambda: jobretry_settings.listen)
    recover_every: float = 1.0
    #: "thread": handlers run in runner threads; "process": each runner hands
    #: its jobs to a child process, so a time limit kills (worker/process_pool.py).
    pool: Literal["thread", "process"] = "thread"
    max_jobs_per_child: int | None = None
    max_memory_mb: int | None = None
    #: Look for due schedule slots (schedules/runs.py); never in burst mode. ``runworker --no-schedules``.
    schedules: bool = True
    #: ``async def`` jobs in flight on the worker's event loop (worker/event_loop.py); 0: in runner threads.
    async_concurrency: int = DEFAULT_ASYNC_CONCURRENCY

    def __post_init__(self) -> None:
        # Checked here, before the worker makes one runner per unit of concurrency.
        if not valid_concurrency(self.concurrency):
            raise ValueError(f"concurrency {self.concurrency!r} is invalid: {CONCURRENCY_RANGE}")
        if not valid_async_concurrency(self.async_concurrency):
            raise ValueError(
                f"async_concurrency {self.async_concurrency!r} is invalid: {ASYNC_CONCURRENCY_RANGE}"
            )

    def claim_size(self, running: int, claimed_total: int) -> int:
        """How many jobs to claim now: 0 while busy, until half the slots are free.

        One claim of many jobs costs about what one claim of a single job does.
        """
        free = self.concurrency - running
        if running and free < max(1, self.concurrency // 2):
            return 0
        if self.max_jobs is not None:
            free = min(free, self.max_jobs - claimed_total)
        return max(free, 0)

    def coroutine_claim_size(self, room: int, claimed_total: int) -> int:
        """How many ``async def`` jobs to claim for the event loop: none until a tenth of its room is free."""
        if room < max(1, self.async_concurrency // 10):
            return 0
        if self.max_jobs is not None:
            room = min(room, self.max_jobs - claimed_total)
        return max(room, 0)


# -- what runs beside the loop for the worker's life: the heartbeat's duties (worker/heartbeat.py) --


@dataclass(frozen=True)
class Shift:
    """The worker a heartbeat's duties serve: its row, how it runs, and when it stops claiming."""

    registration: workers.Registration
    options: WorkerOptions
    #: Set when the worker stops claiming (a signal, or burst or max_jobs done), before its drain.
    stopping: threading.Event


class Duty:
    """One periodic duty of the heartbeat thread; what a duty does not override does nothing."""

    #: What failed, for the log line: "could not <failure>".
    failure: str

    @classmethod
    def serving(cls, shift: Shift) -> Duty | None:
        """This duty for the worker of ``shift``, or None when it has nothing to do there.

        How the heartbeat builds each capability's duty (features.py); most need nothing of the worker.
        """
        return cls()

    def start(self) -> None:
        """On the thread starting the heartbeat, before it runs (the worker may claim at once)."""

    def beat(self, running: int) -> None:
        """Once at start (``running`` 0) and once a beat, after the leases; may raise."""

    def finish(self) -> None:
        """Once, at a clean stop after the drain (in reverse order of the list); may raise."""

    def close(self) -> None:
        """Always, last, on the heartbeat thread; never raises."""


class StartUp:
    """What a SIGTERM or SIGINT received before the worker took over the signals left behind.

    A plain attribute, not a ``threading.Event``: the handler runs in the main
    thread between two bytecodes, and ``Event.set()`` takes the Event's lock,
    so a second signal landing inside it (Ctrl-C twice, a rollout's SIGTERM
    then a terminal's SIGINT) would wait for that lock in the thread holding
    it, for good. Assigning an attribute takes no lock, as relay()'s pipe write takes none.
    """

    stop_requested = False


def is_worker_process(argv: Sequence[str]) -> bool:
    """Whether this process is `manage.py runworker` (or `django-admin runworker`)."""
    return len(argv) > 1 and argv[1] == "runworker"


def remember_stop_requests() -> None:
    """Until Worker.run() installs its own handlers, SIGTERM/SIGINT only set StartUp.stop_requested."""
    if threading.current_thread() is not threading.main_thread():
        return

    def remember(signum: int, frame: FrameType | None) -> None:
        StartUp.stop_requested = True

    signal.signal(signal.SIGTERM, remember)
    signal.signal(signal.SIGINT, remember)


def install_stop_handlers(
    stop: Callable[[], None], stopping: threading.Event, running: Callable[[], int], worker_id: str
) -> None:
    """SIGTERM/SIGINT start the graceful drain; a second one exits at once with code 1.

    After the second signal the jobs still running keep their leases until
    they expire, and other workers recover them, as after a crash.
    """
    if threading.current_thread() is not threading.main_thread():
        return

    def handle(signum: int) -> None:
        if stopping.is_set():
            count = running()
            logger.warning(
                "second signal %s: exiting at once; %d running jobs are recovered after their lease",
                signal.Signals(signum).name,
                count,
                extra={"worker": worker_id, "outcome": "forced_exit", "running": count},
            )
            os._exit(1)
        logger.info("signal %s: finishing running jobs, then exiting", signal.Signals(signum).name)
        stop()

    relayed = relay(handle)
    signal.signal(signal.SIGTERM, relayed)
    signal.signal(signal.SIGINT, relayed)


def relay(act: Callable[[int], None]) -> Callable[[int, FrameType | None], None]:
    """A signal handler that hands each signal to a thread of its own, which calls ``act(signum)``.

    Python runs a handler in the main thread between two bytecodes, maybe while that thread holds a
    ``threading.Event``'s lock (in ``clear()`` or ``wait()``, as the main loop does): a handler that
    sets an Event then waits for its own thread for good (seen once: a worker silent after SIGTERM until
    its watchdog). The handler only writes to a pipe; the relay thread reads it and acts.
    """
    read_end, write_end = os.pipe()

    def relaying() -> None:
        while signum := os.read(read_end, 1):
            act(signum[0])

    threading.Thread(target=relaying, name="jobretry-signals", daemon=True).start()

    def handle(signum: int, frame: FrameType | None) -> None:
        os.write(write_end, bytes([signum]))

    return handle


#: Distinct queue names read from the jobs table to suggest one: enough for any real deployment.
QUEUE_CANDIDATES = 1000


def warn_unknown_queues(queues: Sequence[str]) -> list[str]:
    """Warn about each queue in ``queues`` no job has and no registered task declares; the warnings."""
    declared = {definition.queue_name for name in registry.names() if (definition := registry.get(name))}
    warnings: list[str] = []
    for queue_name in dict.fromkeys(queues):
        if queue_name in declared or Job.objects.filter(queue_name=queue_name).exists():
            continue
        seen = Job.objects.order_by().values_list("queue_name", flat=True).distinct()[:QUEUE_CANDIDATES]
        text = (
            f"--queue {queue_name!r}: no job has this queue and no registered task declares it; "
            f"the worker waits for its first job.{did_you_mean([queue_name], {*declared, *seen, 'default'})}"
        )
        logger.warning(text, extra={"outcome": "unknown_queue", "queue": queue_name})
        warnings.append(text)
    return warnings


def started(worker_id: str, options: WorkerOptions) -> None:
    extra = {"worker": worker_id, "queues": list(options.queues or []), "concurrency": options.concurrency}
    logger.info("worker %s started", worker_id, extra=extra)


def stopped(worker_id: str, attempts: int) -> None:
    logger.info(
        "worker %s stopped after %s",
        worker_id,
        count_of(attempts, "attempt"),
        extra={"worker": worker_id, "attempts": attempts},
    )


def take_unstarted(
    inbox: queue.Queue[ClaimedJob | None], running: dict[AttemptKey, ClaimedJob]
) -> list[ClaimedJob]:
    """Empty the runners' ``inbox``: its jobs leave ``running`` (no runner starts them any more)."""
    not_started: list[ClaimedJob] = []
    while True:
        try:
            job = inbox.get_nowait()
        except queue.Empty:
            break
        if job is not None:
            not_started.append(job)
            running.pop(job.key, None)
    return not_started


def release(not_started: list[ClaimedJob]) -> None:
    """Give the jobs no runner started back, each attempt uncounted; may raise DatabaseError."""
    if not not_started:
        return
    released = claimed.release(not_started)
    for job in not_started:
        logger.info(
            "job %s (%s, queue %s) released unstarted",
            job.id,
            job.task_name,
            job.queue_name,
            extra=log_extra(job, "released"),
        )
    if len(released) < len(not_started):
        kept = sorted(job.id for job in not_started if job.id not in released)
        logger.warning(
            "%d unstarted jobs were not released: their lease was lost, or a cancel was requested "
            "(lease recovery buries those as cancelled)",
            len(kept),
            extra={"outcome": "not_released", "job_ids": kept},
        )


#: The exit code of a worker that stopped with outcomes it could not record (docs/worker.md).
EXIT_UNRECORDED = 3
#: Past the grace period, how long the last writes may take before they are cut (healthy: milliseconds).
DRAIN_MARGIN = 1.0


class Draining(Protocol):
    """What the drain needs of the worker (worker/engine.py's Worker)."""

    id: str
    lease: float
    backoff: Backoff  # the main loop's
    inbox: queue.Queue[ClaimedJob | None]
    outbox: queue.Queue[Succeeded | Failed]
    running: dict[AttemptKey, ClaimedJob]
    time_limits: TimeLimits
    wake: threading.Event

    def record_outcomes(self) -> None: ...

    def unrecorded(self) -> bool: ...

    def unrecorded_jobs(self) -> list[ClaimedJob]: ...


def drain(worker: Draining, grace_ends: float) -> list[int]:
    """Drain until ``grace_ends`` (time.monotonic()); the ids of the jobs left to their leases."""
    watchdog.give_up_at(grace_ends + DRAIN_MARGIN)
    backoff = Backoff(cap=RECONNECT_CAP)
    unreleased = take_unstarted(worker.inbox, worker.running)
    if worker.time_limits.lane is not None:  # coroutine jobs waiting for the event loop's room
        unreleased += worker.time_limits.lane.take_unstarted()
        for job in unreleased:
            worker.running.pop(job.key, None)
    answering = worker.backoff.failing_since is None  # as the main loop left it
    while True:
        writes = bool(unreleased) or worker.unrecorded() or not worker.outbox.empty()
        try:
            if unreleased:
                release(unreleased)
                unreleased = []
            worker.record_outcomes()
            worker.time_limits.end_overdue()
            answering = answering or writes  # it answered, if anything was asked of it
            backoff.succeeded()
            pause = 0.1
        except (DatabaseError, InterfaceError) as exc:
            log_database_error(logging.WARNING, "could not record outcomes while stopping", exc, worker.id)
            drop_connection()
            answering = False
            pause = backoff.failed()
        remaining = grace_ends - time.monotonic()
        if remaining <= 0 or not (worker.running or worker.unrecorded() or unreleased):
            break
        worker.wake.wait(min(pause, remaining))
        worker.wake.clear()
    if answering:  # a database that fails now would only cost another connect_timeout past the grace
        try:
            worker.record_outcomes()
            worker.time_limits.end_at_shutdown(worker.lease)
        except (DatabaseError, InterfaceError) as exc:
            log_database_error(logging.WARNING, "could not record outcomes at shutdown", exc, worker.id)
            drop_connection()
    left = sorted({job.id for job in [*unreleased, *worker.time_limits.alive(), *worker.unrecorded_jobs()]})
    if left:
        logger.warning(
            "worker %s stops without recording the outcome of %d %s (%s): left to their leases, "
            "they are recovered by other workers when those expire",
            worker.id,
            len(left),
            "job" if len(left) == 1 else "jobs",
            ", ".join(map(str, left)),
            extra={"worker": worker.id, "outcome": "left_to_lease", "job_ids": left},
        )
    return left
