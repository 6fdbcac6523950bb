"""What a policy takes and what it returns: its validated parameters, and the decisions as values.

The worker never branches on exceptions directly; it asks the policy and acts
on the returned value (:data:`Decision`), which keeps the decision pure and
property-testable.

The parameters are validated here, each bad value naming its field, so the
policy class (retry.py) reads as the formula it implements. The snooze
budget bounds how often one job may put itself aside, and for how long in
all: ``raise Snooze(delay)`` and ``raise CircuitOpen(for_=...)`` give the
attempt back, so they need a bound of their own, or a job waiting for
something that never comes would never end. The bound is a count
(``max_snoozes``), a time (``snooze_for``: the delays added up), or both,
the first one spent ending the job as ``snooze_budget``. A time fits an
outage: ``Snooze(5)`` through six hours is 4,320 snoozes, which no count
chosen in advance describes.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from django_jobretry.policy.errors import MAX_BUDGET, InvalidPolicy, to_timedelta


class ErrorKind(enum.StrEnum):
    """How a failure is classified: worth retrying later, or never."""

    RETRYABLE = "retryable"
    FATAL = "fatal"


@dataclass(frozen=True, slots=True)
class Classification:
    """How one exception is treated: its kind, any delay it asked for, and the rule that made it fatal."""

    kind: ErrorKind
    requested_delay: timedelta | None = None
    #: Which rule made the error fatal, for people ("ValueError is in the fatal_errors of policy
    #: 'webhooks'"); None when retryable. Not compared: it explains the kind, it is not one.
    rule: str | None = field(default=None, compare=False)


class GiveUpReason(enum.StrEnum):
    """Why a job stops being retried; stored on its dead letter."""

    FATAL = "fatal"
    EXHAUSTED = "exhausted"
    DEADLINE = "deadline"
    SNOOZE_BUDGET = "snooze_budget"


@dataclass(frozen=True, slots=True)
class Retry:
    """Run the job again after ``delay``."""

    delay: timedelta


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Stop retrying; the job becomes a dead letter for ``reason``."""

    reason: GiveUpReason


@dataclass(frozen=True, slots=True)
class Defer:
    """Run the job again after ``delay`` with its attempt given back (a Snooze or a CircuitOpen)."""

    delay: timedelta


type Decision = Retry | GiveUp | Defer


#: Upper bound on ``max_attempts``. Far above any useful schedule (a job
#: retried 10,000 times is a dead letter nobody looks at) and it keeps the
#: construction-time budget check cheap.
MAX_ATTEMPTS_LIMIT = 10_000


def check_attempt(attempt: int) -> None:
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise InvalidPolicy("attempt", attempt, "attempts are numbered from 1")


def attempt_limit(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidPolicy("max_attempts", value, "expected an integer >= 1")
    if not 1 <= value <= MAX_ATTEMPTS_LIMIT:
        raise InvalidPolicy("max_attempts", value, f"must be an integer from 1 to {MAX_ATTEMPTS_LIMIT}")
    return value


#: Automatic requeues a job may get after dying; more is a loop, not a policy.
MAX_REQUEUE_BUDGET = 100


def requeue_budget_value(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REQUEUE_BUDGET:
        allowed = f"an integer from 0 (never requeue automatically) to {MAX_REQUEUE_BUDGET}"
        raise InvalidPolicy("requeue_budget", value, allowed)
    return value


def error_kind(name: str, value: object) -> ErrorKind:
    if isinstance(value, str) and value in ErrorKind:
        return ErrorKind(value)
    raise InvalidPolicy(name, value, f"one of {[k.value for k in ErrorKind]}")


def number(name: str, value: object, allowed: str, ok: Callable[[float], bool]) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidPolicy(name, value, f"expected {allowed}")
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        number = math.inf
    if not math.isfinite(number) or not ok(number):
        raise InvalidPolicy(name, value, f"must be {allowed}")
    return number


def error_classes(name: str, value: object) -> tuple[type[BaseException], ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidPolicy(name, value, "expected a list of exception classes")
    for item in value:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise InvalidPolicy(name, item, "expected an exception class")
    return tuple(value)


#: Most snoozes a policy may allow one job: a job snoozing more often is waiting for something else.
MAX_SNOOZES = 100_000
#: ``max_snoozes`` when a policy sets neither it nor ``snooze_for``.
DEFAULT_SNOOZES = 20


def snooze_budget(max_snoozes: object, snooze_for: object) -> tuple[int, timedelta | None]:
    """The count and the time a policy allows, validated; InvalidPolicy names the bad one.

    ``max_snoozes`` None: 20, or, with a ``snooze_for``, as many as
    :data:`MAX_SNOOZES` (the time is the budget then, not the count).
    """
    time = None if snooze_for is None else to_timedelta("snooze_for", snooze_for, maximum=MAX_BUDGET)
    if max_snoozes is None:
        return (DEFAULT_SNOOZES if time is None else MAX_SNOOZES), time
    if isinstance(max_snoozes, bool) or not isinstance(max_snoozes, int):
        raise InvalidPolicy("max_snoozes", max_snoozes, f"an integer from 0 to {MAX_SNOOZES}")
    if not 0 <= max_snoozes <= MAX_SNOOZES:
        raise InvalidPolicy("max_snoozes", max_snoozes, f"an integer from 0 to {MAX_SNOOZES}")
    return max_snoozes, time
