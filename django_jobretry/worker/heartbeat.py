"""The heartbeat thread: keeps the leases of running jobs alive.

It runs until the worker has finished draining, so jobs still running
during a graceful shutdown keep their leases (docs/design.md#rule-7). A job
whose lease could not be extended has lost it: it is logged once and left
to whoever recovers it. A miss is only reported when the job is still
running at the next beat: the beat may have raced the job's own completion
(recorded, not yet forgotten), and a lost attempt that ends before then is
reported by the fenced recording instead.

Given a registration, the thread also keeps the worker's row in the
workers table (services/workers.py): it registers at once, refreshes the row
with each beat - one statement, whatever the number of jobs - and deletes
it when stopped, after the drain. A failure there is logged and never
touches the leases: the row is only what operators see. With the same
beat, one more statement writes the worker's event counts for the metrics
(worker/counting.py), and again at a clean exit; a failed write keeps the
counts for the next beat. And one more takes the dashboard's status sample
for the current minute unless another worker already has
(services/status_samples.py): whatever goes wrong there is logged and the
beat goes on, since a missing sample only leaves a gap in a chart.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from django.db import DatabaseError

from django_jobretry.humanize import humanize_delay
from django_jobretry.services import counters, status_samples, transitions, workers
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.job_lines import log_extra
from django_jobretry.worker import counting
from django_jobretry.worker.options import WorkerOptions
from django_jobretry.worker.session import (
    drop_connection,
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
    """Every ``every`` seconds, extends the lease of each job ``running()`` returns."""

    def __init__(
        self,
        *,
        worker_id: str,
        running: Callable[[], Sequence[ClaimedJob]],
        lease_seconds: float,
        every: float,
        stop: threading.Event,
        on_cancel: Callable[[int, str], None] | None = None,
        registration: workers.Registration | None = None,
    ) -> None:
        super().__init__(name="jobretry-heartbeat", daemon=True)
        #: Told of each running job an operator asked to cancel (job id, who).
        self.on_cancel = on_cancel
        #: The worker's row in the workers table; None: no row (a bare heartbeat, in tests).
        self.registration = registration
        self.started_at: datetime | None = None
        self._row_failing = self._counts_failing = self._sampling_failing = self._counting = False
        self.worker_id, self.running, self.lease, self.every, self.stop = (
            worker_id,
            running,
            lease_seconds,
            every,
            stop,
        )

    def start(self) -> None:
        """Start counting on the caller's thread: the worker may claim before this thread first runs."""
        if self.registration is not None:
            counting.begin()
            self._counting = True
        super().start()

    def run(self) -> None:
        mark_bookkeeping_thread()
        lost: set[tuple[int, int]] = set()  # (job id, attempt) reported lost
        missed: dict[int, int] = {}  # job id -> attempt not extended at the last beat
        try:
            self._say_alive(0)
            self._sample()
            while not self.stop.wait(self.every):
                current = self.running()
                self._report_lost(current, missed, lost)
                jobs = [job for job in current if (job.id, job.attempt) not in lost]
                try:
                    alive = transitions.heartbeat(jobs, self.lease)
                except DatabaseError as exc:
                    log_database_error(logging.WARNING, "heartbeat failed", exc, self.worker_id)
                    drop_connection()
                    continue
                for job_id, cancelled_by in alive.items():
                    if cancelled_by and self.on_cancel is not None:
                        self.on_cancel(job_id, cancelled_by)
                missed = {job.id: job.attempt for job in jobs if job.id not in alive}
                self._say_alive(len(current))
                self._write_counts()
                self._sample()
            self._write_counts()
            self._say_goodbye()
        finally:
            if self._counting:
                counting.end()
            unmark_bookkeeping_thread()
            drop_connection()

    def _say_alive(self, running: int) -> None:
        """Register or refresh the worker's row; log the lost workers this beat removed."""
        if self.registration is None:
            return
        try:
            beat = workers.beat(self.registration, running, self.started_at)
        except DatabaseError as exc:
            self._failed(self._row_failing, "could not update the workers table", exc)
            self._row_failing = True
            return
        self._row_failing = False
        self.started_at = beat.started_at
        for removed in beat.removed:
            logger.info(
                "worker %s removed from the workers table: no heartbeat for its lease and %s more",
                removed,
                humanize_delay(workers.LOST_KEPT),
                extra={"worker": self.worker_id, "removed_worker": removed, "outcome": "worker_removed"},
            )

    def _write_counts(self) -> None:
        """Write this process's event counts and fold the sessions' rows: one statement."""
        if not self._counting:
            return
        taken = counting.TALLY.take()
        try:
            counters.flush(taken)
        except DatabaseError as exc:
            counting.TALLY.put_back(taken)
            self._failed(self._counts_failing, "could not write the event counters", exc)
            self._counts_failing = True
            return
        self._counts_failing = False

    def _sample(self) -> None:
        """This minute's status sample, unless a worker already took it; never stops the beat."""
        if self.registration is None:
            return
        try:
            status_samples.take()
        except Exception as exc:  # a gap in a chart is never worth a lost lease
            self._failed(self._sampling_failing, "could not take the status sample", exc)
            self._sampling_failing = True
            return
        self._sampling_failing = False

    def _failed(self, already_failing: bool, message: str, exc: BaseException) -> None:
        """Warn once per failing stretch (a table not migrated yet would warn every beat); reconnect."""
        level = logging.DEBUG if already_failing else logging.WARNING
        log_database_error(level, message, exc, self.worker_id)
        drop_connection()

    def _say_goodbye(self) -> None:
        """A clean exit: the worker's row goes (else it would be shown as lost, then removed)."""
        if self.registration is None:
            return
        try:
            workers.unregister(self.registration.worker_id)
        except DatabaseError as exc:
            log_database_error(
                logging.WARNING, "could not remove this worker from the workers table", exc, self.worker_id
            )

    @staticmethod
    def _report_lost(
        current: Sequence[ClaimedJob], missed: dict[int, int], lost: set[tuple[int, int]]
    ) -> None:
        """Warn once for each attempt missed by the last beat and still running now."""
        for job in current:
            if missed.get(job.id) == job.attempt and (job.id, job.attempt) not in lost:
                lost.add((job.id, job.attempt))
                logger.warning(
                    "job %s attempt %s lost its lease while running",
                    job.id,
                    job.attempt,
                    extra=log_extra(job, "lease_lost"),
                )
