"""The policy's exceptions: the root of them all, InvalidPolicy, and what job handlers raise.

- :class:`JobRetryError` is the base of every django-jobretry exception and
  :class:`InvalidPolicy` the policy's validation error; the Django layer
  (exceptions.py) builds on both.
- :class:`FatalError`, :class:`RetryableError`, :class:`Snooze` and
  :class:`CircuitOpen` are what job handlers raise to steer the policy. The
  stored error class of a handler's raise is ``django_jobretry.policy.errors.<Name>``.
- The duration check (:func:`to_timedelta`, :func:`to_seconds`, with
  :data:`MAX_DELAY` and :data:`MAX_BUDGET`) is here because the handler
  errors validate their delays with it, and it raises InvalidPolicy: the
  parameters (decisions.py) and the settings build on it from above.

Kept free of Django so the policy can be imported and tested on its own.
"""

from __future__ import annotations

import math
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


#: Longest single delay accepted. Anything longer is almost always a unit
#: mistake (milliseconds given as seconds), and it keeps ``now + delay`` far
#: from ``datetime`` overflow.
MAX_DELAY = timedelta(days=365)

#: Longest ``total_budget`` or ``retry_for`` accepted: a century, which is
#: "unbounded" in practice while staying far from ``timedelta`` overflow.
MAX_BUDGET = timedelta(days=36_500)


def to_timedelta(
    field: str,
    value: object,
    *,
    allow_zero: bool = False,
    maximum: timedelta = MAX_DELAY,
) -> timedelta:
    """Turn seconds or a ``timedelta`` into a validated, positive ``timedelta``."""
    return timedelta(seconds=to_seconds(field, value, allow_zero=allow_zero, maximum=maximum))


def to_seconds(
    field: str,
    value: object,
    *,
    allow_zero: bool = False,
    maximum: timedelta = MAX_DELAY,
) -> float:
    """Validated seconds at full float precision.

    The policy computes with these rather than with microsecond-rounded
    timedeltas: rounding base_delay first would be multiplied by
    multiplier**(a-1) and drift from the documented formula (docs/policy.md).
    """
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        raise InvalidPolicy(field, value, "expected seconds (int or float) or a timedelta")
    try:
        seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    except OverflowError:  # an int too large for a float
        seconds = math.inf
    if not math.isfinite(seconds):
        raise InvalidPolicy(field, value, "must be a finite number of seconds")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        allowed = "must be >= 0 seconds" if allow_zero else "must be > 0 seconds"
        raise InvalidPolicy(field, value, allowed)
    if seconds > maximum.total_seconds():
        raise InvalidPolicy(
            field, value, f"must be at most {maximum.days} days ({maximum.total_seconds():.0f} s)"
        )
    if timedelta(seconds=seconds) == timedelta(0) and not allow_zero:
        raise InvalidPolicy(field, value, "must be at least one microsecond")
    return seconds


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
