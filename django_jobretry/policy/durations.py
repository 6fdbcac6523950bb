"""Validation of the duration parameters shared by policies and errors."""

from __future__ import annotations

import math
from datetime import timedelta

from django_jobretry.policy.base import InvalidPolicy

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
