"""What job handlers raise to steer the policy: FatalError and RetryableError.

Kept free of Django so the policy can be imported and tested on its own.
The stored error class of a handler's raise is ``django_jobretry.policy.errors.<Name>``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django_jobretry.policy.base import JobRetryError
from django_jobretry.policy.durations import to_timedelta


class FatalError(JobRetryError):
    """Raise from a job to say retrying cannot help (bad payload, missing record).

    The job goes straight to the dead letters after this attempt.
    """


class RetryableError(JobRetryError):
    """Raise from a job to ask for another attempt, optionally after ``delay``.

    ``delay`` (seconds or ``timedelta``) overrides the policy's backoff for this
    one retry, e.g. from a ``Retry-After`` header; the attempt limit and
    ``retry_for`` still apply.
    """

    def __init__(self, *args: Any, delay: float | timedelta | None = None) -> None:
        super().__init__(*args)
        self.delay: timedelta | None = None
        if delay is not None:
            self.delay = to_timedelta("delay", delay, allow_zero=True)
