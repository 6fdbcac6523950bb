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


class Snooze(JobRetryError):
    """Raise from a job to run it again after ``delay`` without spending an attempt.

    For work that is not ready yet (a file not uploaded, a rate limit's
    window): the attempt is given back and the snooze recorded in the job's
    history. A policy's ``max_snoozes`` bounds how often one job may snooze;
    past it the job becomes a dead letter for ``snooze_budget``.
    """

    def __init__(self, delay: float | timedelta, *args: Any) -> None:
        super().__init__(*args)
        self.delay: timedelta = to_timedelta("delay", delay, allow_zero=True)


class CircuitOpen(JobRetryError):
    """Raise from a job to hold every job of its task for ``for_``, e.g. on a 503 with Retry-After.

    The breaker opens at once, whatever the policy's ``circuit`` says; this
    job gets its attempt back and runs again once the breaker lets a probe
    through (docs/outages.md). Counted against the job's ``max_snoozes``.
    """

    def __init__(self, *args: Any, for_: float | timedelta) -> None:
        super().__init__(*args)
        self.for_: timedelta = to_timedelta("for_", for_)


def requested_delay(error: RetryableError) -> timedelta | None:
    """The delay a RetryableError asked for, when it is a valid one; else None (the policy's backoff).

    The error is the handler's object: a subclass may skip ``__init__`` (no
    ``delay`` at all), store a string, a negative or a century-long delay, or
    make ``delay`` a property that raises. None of that may stop the worker
    recording the failure, so an unusable delay is ignored, never trusted.
    """
    try:
        delay = getattr(error, "delay", None)
        return None if delay is None else to_timedelta("delay", delay, allow_zero=True)
    except Exception:
        return None
