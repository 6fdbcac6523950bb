"""The heartbeat thread: keeps the leases of running jobs alive, then runs its duties.

It runs until the worker has finished draining, so jobs still running
during a graceful shutdown keep their leases (docs/design.md#rule-7). A job
whose lease could not be extended has lost it: it is logged once and left
to whoever recovers it. A miss is only reported when the job is still
running at the next beat: the beat may have raced the job's own completion
(recorded, not yet forgotten), and a lost attempt that ends before then is
reported by the fenced recording instead.

Leases come first in every beat; then the thread runs its duties (below:
what a worker reports for operators) in turn, once at start and once a
beat. None of these duties can cost a lease: a duty that fails is logged
(once per failing stretch, then at DEBUG: a table not migrated yet would
warn every beat), its connection is dropped, and the beat goes on. A
capability's periodic duty is named by its entry in features.py, built for
the worker by its ``serving``, and runs between the worker's own duties
below. The :class:`Duty` base lives in worker/lifecycle.py, which reads no
FEATURES, so a capability's duty may subclass it without an import cycle.

- :class:`WorkerRow` keeps the worker's row in the workers table
  (console/workers.py): registered at once, refreshed with each beat (one
  statement, whatever the number of jobs), deleted after the drain.
- :class:`EventCounts` writes the process's event counts for the metrics
  (worker/runner.py) with one statement a beat and once more at a clean
  exit; a failed write keeps the counts for the next beat.
- :class:`StatusSample` takes the dashboard's sample for the current minute
  unless another worker already has (console/trends.py): a missing
  sample only leaves a gap in a chart.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from django.db import DatabaseError

from django_jobretry import features
from django_jobretry.console import counters, trends, workers
from django_jobretry.display import humanize_delay
from django_jobretry.jobs import claimed
from django_jobretry.jobs.claimed import ClaimedJob
from django_jobretry.jobs.events import log_extra
from django_jobretry.worker import runner
from django_jobretry.worker.lifecycle import Duty, Shift, WorkerOptions
from django_jobretry.worker.session import (
    RECONNECT_CAP,
    Backoff,
    drop_connection,
    log_back,
    log_database_error,
    mark_bookkeeping_thread,
    unmark_bookkeeping_thread,
)

logger = logging.getLogger("django_jobretry")

#: How long an exiting worker waits for its heartbeat thread to remove its row:
#: the thread is a daemon, which dies with the process.
GOODBYE_SECONDS = 5.0


def registration(worker_id: str, host: str, options: WorkerOptions, lease: float) -> workers.Registration:
    """This worker process as the workers table shows it."""
    return workers.Registration(
        worker_id=worker_id,
        host=host,
        pid=os.getpid(),
        queues=tuple(options.queues or ()),
        concurrency=options.concurrency,
        pool=options.pool,
        version=workers.package_version(),
        lease_seconds=lease,
    )


class Heartbeat(threading.Thread):
    """Every ``every`` seconds, extends the lease of each job ``running()`` returns, then runs its duties."""

    def __init__(
        self,
        *,
        worker_id: str,
        running: Callable[[], Sequence[ClaimedJob]],
        lease_seconds: float,
        every: float,
        stop: threading.Event,
        on_cancel: Callable[[int, str], None] | None = None,
        shift: Shift | None = None,
    ) -> None:
        super().__init__(name="jobretry-heartbeat", daemon=True)
        #: Told of each running job an operator asked to cancel (job id, who).
        self.on_cancel = on_cancel
        #: A registered worker's duties (console_duties); none for a bare heartbeat (in tests).
        self.duties: list[Duty] = console_duties(shift) if shift is not None else []
        self._failing: set[int] = set()  # indexes of the duties failing since their last success
        self.worker_id, self.running, self.lease, self.every, self.stop = (
            worker_id,
            running,
            lease_seconds,
            every,
            stop,
        )

    def start(self) -> None:
        """Start the duties on the caller's thread: the worker may claim before this thread first runs."""
        for duty in self.duties:
            duty.start()
        super().start()

    def run(self) -> None:
        mark_bookkeeping_thread()
        lost: set[tuple[int, int]] = set()  # (job id, attempt) reported lost
        missed: dict[int, int] = {}  # job id -> attempt not extended at the last beat
        backoff = Backoff(first=min(0.5, self.every), cap=min(RECONNECT_CAP, self.every))
        pause = self.every
        try:
            self._run_duties(0)
            while not self.stop.wait(pause):
                current = self.running()
                self._report_lost(current, missed, lost)
                jobs = [job for job in current if (job.id, job.attempt) not in lost]
                try:
                    alive = claimed.heartbeat(jobs, self.lease)
                except DatabaseError as exc:
                    # Once per failing stretch: it is tried again every few seconds.
                    level = logging.WARNING if backoff.failing_since is None else logging.DEBUG
                    log_database_error(level, "heartbeat failed", exc, self.worker_id)
                    drop_connection()
                    pause = backoff.failed()  # sooner than a beat: the leases run out meanwhile
                    continue
                log_back(backoff.succeeded(), self.worker_id, "the heartbeat")
                pause = self.every
                for job_id, cancelled_by in alive.items():
                    if cancelled_by and self.on_cancel is not None:
                        self.on_cancel(job_id, cancelled_by)
                missed = {job.id: job.attempt for job in jobs if job.id not in alive}
                self._run_duties(len(current))
            self._finish_duties()
        finally:
            for duty in self.duties:
                duty.close()
            unmark_bookkeeping_thread()
            drop_connection()

    def _run_duties(self, running: int) -> None:
        """Each duty's beat; a failure is logged (once per failing stretch) and the next duty runs."""
        for index, duty in enumerate(self.duties):
            try:
                duty.beat(running)
            except Exception as exc:  # a duty is only what operators see: never worth a lost lease
                level = logging.DEBUG if index in self._failing else logging.WARNING
                self._failing.add(index)
                log_database_error(level, f"could not {duty.failure}", exc, self.worker_id)
                drop_connection()
            else:
                self._failing.discard(index)

    def _finish_duties(self) -> None:
        """A clean stop, after the drain: each duty's last word, the last duty first."""
        for duty in reversed(self.duties):
            try:
                duty.finish()
            except Exception as exc:
                log_database_error(logging.WARNING, f"could not {duty.failure} at exit", exc, self.worker_id)
                drop_connection()

    def _report_lost(
        self, current: Sequence[ClaimedJob], missed: dict[int, int], lost: set[tuple[int, int]]
    ) -> None:
        """Warn once for each attempt missed by the last beat and still running now."""
        for job in current:
            if missed.get(job.id) == job.attempt and (job.id, job.attempt) not in lost:
                lost.add((job.id, job.attempt))
                logger.warning(
                    "job %s attempt %s lost its lease while running on worker %s",
                    job.id,
                    job.attempt,
                    self.worker_id,
                    extra=log_extra(job, "lease_lost", worker=self.worker_id),
                )


class WorkerRow(Duty):
    """The worker's row in the workers table; logs the lost workers a beat removed."""

    failure = "update the workers table"

    def __init__(self, registration: workers.Registration) -> None:
        self.registration = registration
        self.started_at: datetime | None = None

    def beat(self, running: int) -> None:
        beat = workers.beat(self.registration, running, self.started_at)
        self.started_at = beat.started_at
        for removed in beat.removed:
            logger.info(
                "worker %s removed from the workers table: no heartbeat for its lease and %s more",
                removed,
                humanize_delay(workers.LOST_KEPT),
                extra={
                    "worker": self.registration.worker_id,
                    "removed_worker": removed,
                    "outcome": "worker_removed",
                },
            )

    def finish(self) -> None:
        """A clean exit: the row goes (else it would be shown as lost, then removed)."""
        workers.unregister(self.registration.worker_id)


class EventCounts(Duty):
    """This process's event counts, written and folded with one statement."""

    failure = "write the event counters"

    def start(self) -> None:
        runner.begin_counting()

    def beat(self, running: int) -> None:
        taken = runner.TALLY.take()
        try:
            counters.flush(taken)
        except BaseException:
            runner.TALLY.put_back(taken)
            raise

    def finish(self) -> None:
        self.beat(0)

    def close(self) -> None:
        runner.end_counting()


class StatusSample(Duty):
    """This minute's status sample for the dashboard, unless a worker already took it."""

    failure = "take the status sample"

    def beat(self, running: int) -> None:
        trends.take_sample()


def console_duties(shift: Shift) -> list[Duty]:
    """A registered worker's duties, in the order each beat runs them: its own, and each capability's.

    A capability's duty with a ``serving`` (worker/lifecycle.py ``Duty``) is built by it for this
    worker, and may decline (None); one shaped as a duty without it is built without arguments.
    """
    found: list[Duty | None] = []
    for feature in features.FEATURES:
        if feature.duty:
            kind = features.load(feature.duty)
            found.append(kind.serving(shift) if hasattr(kind, "serving") else kind())
    return [WorkerRow(shift.registration), EventCounts(), *filter(None, found), StatusSample()]
