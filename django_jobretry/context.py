"""``current_job()``: which job and attempt the running handler is.

Handlers use it for idempotency keys ("charge-{job_id}") or to behave
differently on a last attempt; it is None outside a worker.
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
