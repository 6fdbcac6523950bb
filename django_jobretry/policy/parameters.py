"""Validation of the policy's scalar parameters: each bad value names its field.

Split from retry.py so the policy class reads as the formula it implements.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from django_jobretry.policy.base import InvalidPolicy
from django_jobretry.policy.decisions import ErrorKind

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
