"""How the package speaks of a job: the structured fields of its log lines, and its signals.

Every transition logs the job id and attempt and never the arguments. Every
retry and every dead letter, whoever made it (a worker's failure, lease
recovery, an operator's cancel, the django-q2 adapter), is announced here:
one log line and one signal with one keyword shape, the one
docs/worker.md#django-signals-for-metrics-and-alerts documents.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from django.dispatch import Signal

from django_jobretry import signals

logger = logging.getLogger("django_jobretry")


class AboutJob(Protocol):
    """What a line or a signal says of a job: a claimed job, a recovered one, a cancelled one."""

    @property
    def id(self) -> int | str: ...
    @property
    def task_name(self) -> str: ...
    @property
    def queue_name(self) -> str: ...
    @property
    def attempt(self) -> int: ...


@dataclass(frozen=True)
class JobRef:
    """A job as a statement's RETURNING named it, for its line and its signal."""

    id: int
    task_name: str
    queue_name: str
    attempt: int


def log_extra(job: AboutJob, outcome: str, **more: Any) -> dict[str, Any]:
    """The structured fields every transition log line carries (never arguments)."""
    return {
        "job_id": job.id,
        "task": job.task_name,
        "queue": job.queue_name,
        "attempt": job.attempt,
        "outcome": outcome,
        **more,
    }


#: How a job line starts: id, attempt, task and queue, in the message as in ``extra``.
JOB_LINE = "job %s attempt %s (%s, queue %s)"


def job_line_args(job: AboutJob) -> tuple[object, ...]:
    """The arguments of JOB_LINE, so messages stay lazily formatted."""
    return (job.id, job.attempt, job.task_name, job.queue_name)


def send_job_signal(sender: type, signal: Signal, job: AboutJob, **more: Any) -> None:
    """A signal about ``job``, with the keyword arguments every job signal carries."""
    signals.send(
        signal,
        sender,
        log_extra(job, "signal_error"),
        job_id=job.id,
        task_name=job.task_name,
        queue_name=job.queue_name,
        attempt=job.attempt,
        **more,
    )


def announce_retry(
    sender: type,
    job: AboutJob,
    then: str,
    then_args: tuple[object, ...],
    *,
    reason: str,
    delay: timedelta,
    outcome: str = "retry_scheduled",
    level: int = logging.INFO,
    **logged: Any,
) -> None:
    """A committed retry: JOB_LINE, then ``then`` % ``then_args``, then ``job_retry_scheduled``.

    ``reason`` is how the attempt ended (``error``, ``timeout``, ``shutdown``,
    ``lease_expired``...); ``logged`` goes to the line's ``extra`` only.
    """
    extra = log_extra(job, outcome, reason=reason, delay=delay.total_seconds(), **logged)
    logger.log(level, f"{JOB_LINE} {then}", *job_line_args(job), *then_args, extra=extra)
    send_job_signal(sender, signals.job_retry_scheduled, job, reason=reason, delay=delay)


def announce_dead(
    sender: type,
    job: AboutJob,
    then: str,
    then_args: tuple[object, ...],
    *,
    reason: str,
    dead_letter_id: int,
    requeued_as: int | None = None,
    outcome: str = "dead_lettered",
    **logged: Any,
) -> None:
    """A committed burial: the job's line (a warning; JOB_LINE, then ``then``), then ``job_dead_lettered``.

    ``requeued_as`` is the job a policy's ``requeue_budget`` revived the dead
    letter as, already (so a receiver knows whether the job has really ended).
    """
    extra = log_extra(job, outcome, reason=reason, dead_letter_id=dead_letter_id, **logged)
    logger.warning(f"{JOB_LINE} {then}", *job_line_args(job), *then_args, extra=extra)
    send_job_signal(
        sender,
        signals.job_dead_lettered,
        job,
        reason=reason,
        dead_letter_id=dead_letter_id,
        requeued_as=requeued_as,
    )
