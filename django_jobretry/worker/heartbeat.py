"""The heartbeat thread: keeps the leases of running jobs alive, then runs its duties.

It runs until the worker has finished draining, so jobs still running
during a graceful shutdown keep their leases (docs/design.md#rule-7). A job
whose lease could not be extended has lost it: it is logged once and left
to whoever recovers it. A miss is only reported when the job is still
running at the next beat: the beat may have raced the job's own completion
(recorded, not yet forgotten), and a lost attempt that ends before then is
reported by the fenced recording instead.

Leases come first in every beat; then the thread runs its duties (worker/duties.py).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence

from django.db import DatabaseError

from django_jobretry.console import workers
from django_jobretry.services import transitions
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.job_lines import log_extra
from django_jobretry.worker import duties as duty_list
from django_jobretry.worker.duties import Duty
from django_jobretry.worker.options import WorkerOptions
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
        registration: workers.Registration | None = None,
    ) -> None:
        super().__init__(name="jobretry-heartbeat", daemon=True)
        #: Told of each running job an operator asked to cancel (job id, who).
        self.on_cancel = on_cancel
        #: A registered worker's duties (worker/duties.py); none for a bare heartbeat (in tests).
        self.duties: list[Duty] = duty_list.console(registration) if registration is not None else []
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
                    alive = transitions.heartbeat(jobs, self.lease)
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
