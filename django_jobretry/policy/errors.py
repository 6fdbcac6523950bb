"""Exceptions of the policy layer: what handlers raise and what bad input gets.

Kept free of Django so the policy can be imported and tested on its own.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any


class JobRetryError(Exception):
    """Base class of every django-jobretry exception; do not raise it directly."""


class InvalidPolicy(JobRetryError, ValueError):
    """A retry policy parameter is out of range or of the wrong type.

    ``field``, ``value`` and ``allowed`` let callers (system checks, admin
    forms) point at the exact mistake instead of re-parsing the message.
    """

    def __init__(self, field: str, value: object, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}={value!r} is invalid: {allowed}")


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
            # Imported here to avoid a cycle: durations raises InvalidPolicy.
            from django_jobretry.policy.durations import to_timedelta

            self.delay = to_timedelta("delay", delay, allow_zero=True)
