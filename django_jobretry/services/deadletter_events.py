"""What every surface of the dead-letter service says after a requeue or discard commits.

One log line and one signal per dead letter, with the actor, whichever
surface (admin, command, Python API) acted: an operator's action is never
silent in the logs of the process that made it.
"""

from __future__ import annotations

import logging

from django_jobretry import signals
from django_jobretry.models import DeadLetter, Job
from django_jobretry.services.resubmitters import Resubmitted

logger = logging.getLogger("django_jobretry")


def announce_requeue(
    dead_letter_id: int,
    job_id: int | str,
    task_name: str,
    queue_name: str,
    requeue_count: int,
    *,
    actor: str | None,
    became: str = "job",
) -> None:
    """Log and signal a committed requeue: who, which dead letter, what it became (``became`` ``job_id``)."""
    extra = {
        "dead_letter_id": dead_letter_id,
        "job_id": job_id,
        "task": task_name,
        "queue": queue_name,
        "attempt": 0,
        "outcome": "requeued",
        "actor": actor or "",
        "requeue_count": requeue_count,
    }
    logger.info(
        "dead letter %s (%s, queue %s) requeued as %s %s by %s",
        dead_letter_id,
        task_name,
        queue_name,
        became,
        job_id,
        actor or "an unnamed caller",
        extra=extra,
    )
    signals.send(
        signals.job_requeued,
        DeadLetter,
        extra,
        dead_letter_id=dead_letter_id,
        job_id=job_id,
        task_name=task_name,
        queue_name=queue_name,
        requeue_count=requeue_count,
        actor=actor,
    )


def announced_requeue(dead: DeadLetter, job: Job | Resubmitted, actor: str | None) -> None:
    """:func:`announce_requeue` of an operator's requeue of ``dead`` as ``job``."""
    became = f"{job.source} task" if isinstance(job, Resubmitted) else "job"
    announce_requeue(
        dead.pk, job.pk, job.task_name, job.queue_name, job.requeue_count, actor=actor, became=became
    )


def announce_discard(dead: DeadLetter, actor: str | None) -> None:
    """Log and signal a committed discard, with who did it."""
    extra = {
        "dead_letter_id": dead.pk,
        "job_id": dead.job_id,
        "task": dead.task_name,
        "queue": dead.queue_name,
        "attempt": dead.attempts,
        "outcome": "discarded",
        "actor": actor or "",
    }
    logger.info(
        "dead letter %s (%s, queue %s) discarded by %s",
        dead.pk,
        dead.task_name,
        dead.queue_name,
        actor or "an unnamed caller",
        extra=extra,
    )
    signals.send(
        signals.dead_letter_discarded,
        DeadLetter,
        extra,
        dead_letter_id=dead.pk,
        job_id=dead.job_id,
        task_name=dead.task_name,
        queue_name=dead.queue_name,
        actor=actor,
    )
