"""How a worker speaks of a job: the structured fields of its log lines, and its signals.

Every transition logs the job id and attempt and never the arguments; every
worker signal carries the same keyword arguments.
"""

from __future__ import annotations

from typing import Any

from django.dispatch import Signal

from django_jobretry import signals
from django_jobretry.services.claimed import ClaimedJob


def log_extra(job: ClaimedJob, outcome: str, **more: Any) -> dict[str, Any]:
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


def job_line_args(job: ClaimedJob) -> tuple[object, ...]:
    """The arguments of JOB_LINE, so messages stay lazily formatted."""
    return (job.id, job.attempt, job.task_name, job.queue_name)


def send_job_signal(sender: type, signal: Signal, job: ClaimedJob, **more: Any) -> None:
    """A worker signal about ``job``, with the keyword arguments every worker signal carries."""
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
