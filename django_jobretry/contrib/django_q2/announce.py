"""What the monitor says once a django-q2 task's retry or burial is committed: a log line, a signal.

The same lines as our own workers', and the same signal shape
(jobs/events.py, docs/worker.md#django-signals-for-metrics-and-alerts), so one log query and one
signal receiver cover both: the message names the task, its queue, the
attempt and how it ended.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django_jobretry import signals
from django_jobretry.jobs.events import failure_phrase
from django_jobretry.jobs.history import AttemptEntry
from django_jobretry.models import DeadLetter, DeadReason
from django_jobretry.policy import Decision, GiveUp, Retry

logger = logging.getLogger("django_jobretry")

#: How a django-q2 task's line starts, like JOB_LINE for our jobs.
TASK_LINE = "django-q2 task %s attempt %s (%s, queue %s) %s"


@dataclass(frozen=True)
class Judgement:
    """The policy's decision on one failed attempt, and what the history says of it (monitor.judge)."""

    decision: Decision
    attempt: int
    max_attempts: int
    func_name: str
    entry: AttemptEntry
    reason: DeadReason | None  # set when giving up


class DjangoQ2Cluster:
    """The sender of the worker signals the adapter sends for django-q2 tasks."""


def announce(judged: Judgement, package: dict[str, Any], *, queue: str, dead: DeadLetter | None) -> None:
    """Log and signal a committed retry or burial, like the worker does for our jobs."""
    decision, attempt, func_name, entry = judged.decision, judged.attempt, judged.func_name, judged.entry
    common = {"job_id": package["id"], "task_name": func_name, "queue_name": queue, "attempt": attempt}
    phrase, message = failure_phrase(entry, (package.get("args"), package.get("kwargs")))
    extra = {"task": func_name, "queue": queue, "attempt": attempt, "error_class": entry["error_class"]}
    logged = {**extra, "error_message": message}
    line = (package["id"], attempt, func_name, queue, phrase)
    if isinstance(decision, GiveUp) and dead is not None:
        reason = str(dead.reason)
        logger.warning(
            f"{TASK_LINE}; dead letter %s (%s)",
            *line,
            dead.pk,
            reason,
            extra={**logged, "outcome": "dead_lettered", "reason": reason, "dead_letter_id": dead.pk},
        )
        signals.send(
            signals.job_dead_lettered,
            DjangoQ2Cluster,
            extra,
            reason=reason,
            dead_letter_id=dead.pk,
            requeued_as=None,
            **common,
        )
    elif isinstance(decision, Retry):
        seconds = decision.delay.total_seconds()
        logger.info(
            f"{TASK_LINE}; retry in %.3fs",
            *line,
            seconds,
            extra={**logged, "outcome": "retry_scheduled", "delay": seconds},
        )
        signals.send(
            signals.job_retry_scheduled,
            DjangoQ2Cluster,
            extra,
            reason=entry["ended"],
            delay=decision.delay,
            **common,
        )
