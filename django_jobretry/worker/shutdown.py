"""Shutdown: the jobs a stopping worker claimed but never started go back at once.

Waiting for their lease to expire would delay them for nothing: no handler
ran, so nothing can overlap. Releasing also uncounts the attempt
(transitions.release), since none was made.
"""

from __future__ import annotations

import logging
import queue

from django_jobretry.services import transitions
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.job_lines import log_extra

logger = logging.getLogger("django_jobretry")


def take_unstarted(inbox: queue.Queue[ClaimedJob | None], running: dict[int, ClaimedJob]) -> list[ClaimedJob]:
    """Empty the runners' ``inbox``: its jobs leave ``running`` (no runner starts them any more)."""
    not_started: list[ClaimedJob] = []
    while True:
        try:
            job = inbox.get_nowait()
        except queue.Empty:
            break
        if job is not None:
            not_started.append(job)
            running.pop(job.id, None)
    return not_started


def release(not_started: list[ClaimedJob]) -> None:
    """Give the jobs no runner started back, each attempt uncounted; may raise DatabaseError."""
    if not not_started:
        return
    released = transitions.release(not_started)
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
