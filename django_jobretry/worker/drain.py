"""The graceful drain, kept to its grace period whether or not the database answers.

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
import queue
import threading
import time
from typing import Protocol

from django.db import DatabaseError, InterfaceError

from django_jobretry.services.claimed import ClaimedJob, Failed, Succeeded
from django_jobretry.worker import watchdog
from django_jobretry.worker.session import RECONNECT_CAP, Backoff, drop_connection, log_database_error
from django_jobretry.worker.shutdown import release, take_unstarted
from django_jobretry.worker.time_limits import TimeLimits

logger = logging.getLogger("django_jobretry")

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
    running: dict[int, ClaimedJob]
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
