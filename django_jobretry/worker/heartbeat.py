"""The heartbeat thread: keeps the leases of running jobs alive.

It runs until the worker has finished draining, so jobs still running
during a graceful shutdown keep their leases (docs/design.md#rule-7). A job
whose lease could not be extended has lost it: it is logged once and left
to whoever recovers it. A miss is only reported when the job is still
running at the next beat: the beat may have raced the job's own completion
(recorded, not yet forgotten), and a lost attempt that ends before then is
reported by the fenced recording instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from django.db import DatabaseError

from django_jobretry.services import transitions
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.outcomes import log_extra
from django_jobretry.worker.session import (
    drop_connection,
    log_database_error,
    mark_bookkeeping_thread,
    unmark_bookkeeping_thread,
)

logger = logging.getLogger("django_jobretry")


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
    ) -> None:
        super().__init__(name="jobretry-heartbeat", daemon=True)
        #: Told of each running job an operator asked to cancel (job id, who).
        self.on_cancel = on_cancel
        self.worker_id, self.running, self.lease, self.every, self.stop = (
            worker_id,
            running,
            lease_seconds,
            every,
            stop,
        )

    def run(self) -> None:
        mark_bookkeeping_thread()
        lost: set[tuple[int, int]] = set()  # (job id, attempt) reported lost
        missed: dict[int, int] = {}  # job id -> attempt not extended at the last beat
        try:
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
        finally:
            unmark_bookkeeping_thread()
            drop_connection()

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
