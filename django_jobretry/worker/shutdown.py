"""Shutdown: the jobs a stopping worker claimed but never started go back at once;
those still running after the grace period end as "shutdown".

Waiting for their lease to expire would delay unstarted jobs for nothing: no
handler ran, so nothing can overlap. Releasing also uncounts the attempt
(transitions.release), since none was made.
"""

from __future__ import annotations

import logging
import queue
import time
from datetime import timedelta

from django_jobretry.services import transitions
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.job_lines import log_extra
from django_jobretry.services.outcomes import Interrupted
from django_jobretry.worker.process_pool import STOP_SECONDS
from django_jobretry.worker.time_limits import TimeLimits

logger = logging.getLogger("django_jobretry")


def release_unstarted(inbox: queue.Queue[ClaimedJob | None], running: dict[int, ClaimedJob]) -> None:
    """Empty the runners' ``inbox`` and release its jobs; they leave ``running``."""
    not_started: list[ClaimedJob] = []
    while True:
        try:
            job = inbox.get_nowait()
        except queue.Empty:
            break
        if job is not None:
            not_started.append(job)
    if not not_started:
        return
    released = transitions.release(not_started)
    for job in not_started:
        running.pop(job.id, None)
        logger.info(
            "job %s (%s, queue %s) released unstarted",
            job.id,
            job.task_name,
            job.queue_name,
            extra=log_extra(job, "released"),
        )
    if len(released) < len(not_started):
        logger.warning("%d unstarted jobs had already lost their lease", len(not_started) - len(released))


def interrupt_running(time_limits: TimeLimits, lease: float) -> None:
    """After the grace period: end every attempt still running as "shutdown".

    The process pool kills the children still running a job and waits until
    their runners have reaped them (and ended their database sessions): the
    runs are over, so the jobs are ready again at once. A thread cannot be
    stopped: it runs until this process exits, right after, so its job waits
    one lease before another worker may start it. Either way the two runs of
    a job never overlap.
    """
    slots = time_limits.slots
    for slot in slots:
        slot.interrupt()
    deadline = time.monotonic() + STOP_SECONDS
    reaped = all(slot.wait_idle(max(deadline - time.monotonic(), 0)) for slot in slots)
    hold = timedelta(0) if slots and reaped else timedelta(seconds=lease)
    for job in time_limits.alive():
        time_limits.recorder.record_failure(Interrupted(job, hold=hold))
        time_limits.running.pop(job.id, None)
