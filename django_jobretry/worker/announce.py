"""A worker's own lines: when it started and stopped, with what it was asked to run."""

from __future__ import annotations

import logging

from django_jobretry.display.humanize import count_of
from django_jobretry.worker.options import WorkerOptions

logger = logging.getLogger("django_jobretry")


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
