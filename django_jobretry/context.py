"""``current_job()``: which job and attempt the running handler is.

Handlers use it for idempotency keys or to behave differently on a last
attempt; it is None outside a worker. A requeue makes a new job with a new
id: keys that must hold across requeues use ``original_job_id``
(docs/decisions/0005-requeue-creates-a-new-job.md).
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass


@dataclass(frozen=True)
class JobContext:
    """The attempt being run right now."""

    job_id: int
    task_name: str
    queue_name: str
    attempt: int
    max_attempts: int
    #: The job id the requeue chain started from; ``job_id`` when never requeued.
    original_job_id: int
    #: How many times this job's dead letters were requeued.
    requeue_count: int = 0
    #: Its workflow step (docs/workflows.md); None outside a flow.
    flow_step_id: int | None = None

    @property
    def is_last_attempt(self) -> bool:
        return self.attempt >= self.max_attempts


_current: contextvars.ContextVar[JobContext | None] = contextvars.ContextVar(
    "jobretry_current_job", default=None
)


def current_job() -> JobContext | None:
    """The job this code runs in, or None when not called by a worker."""
    return _current.get()


def set_current_job(context: JobContext | None) -> contextvars.Token[JobContext | None]:
    return _current.set(context)


def reset_current_job(token: contextvars.Token[JobContext | None]) -> None:
    _current.reset(token)
