"""Tests added for mutants of `make mutation` that the rest of the suite let survive.

Each one pins behaviour a caller relies on but no other test checked exactly:
the ``field``/``value``/``allowed`` of every ``InvalidPolicy`` (the system
checks build their messages from them), the inclusive limits of the duration
checks, zero as a valid requested delay, the full schedule rows, and hashing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from django_jobretry.policy import (
    ErrorKind,
    InvalidPolicy,
    Retry,
    RetryableError,
    RetryPolicy,
    ScheduleRow,
)
from django_jobretry.policy.durations import MAX_BUDGET, MAX_DELAY

POLICY = RetryPolicy(max_attempts=4, base_delay=10, multiplier=3, max_delay=100, jitter=0.5)
NOT_SECONDS = "expected seconds (int or float) or a timedelta"
NOT_A_LIST = "expected a list of exception classes"


def check_invalid(error: InvalidPolicy, field: str, value: object, allowed: str) -> None:
    """The three attributes and the message built from them."""
    assert (error.field, repr(error.value), error.allowed) == (field, repr(value), allowed)
    assert str(error) == f"{field}={value!r} is invalid: {allowed}"


@pytest.mark.parametrize(
    ("kwargs", "field", "value", "allowed"),
    [
        ({"max_attempts": "3"}, "max_attempts", "3", "expected an integer >= 1"),
        ({"max_attempts": 0}, "max_attempts", 0, "must be an integer from 1 to 10000"),
        ({"base_delay": "10"}, "base_delay", "10", NOT_SECONDS),
        ({"base_delay": math.inf}, "base_delay", math.inf, "must be a finite number of seconds"),
        ({"base_delay": 0}, "base_delay", 0, "must be > 0 seconds"),
        ({"base_delay": -1}, "base_delay", -1, "must be > 0 seconds"),
        ({"base_delay": 1e-9}, "base_delay", 1e-9, "must be at least one microsecond"),
        ({"base_delay": 60, "max_delay": 30}, "max_delay", 30, "must be >= base_delay (60 s)"),
        ({"multiplier": "2"}, "multiplier", "2", "expected a finite number >= 1.0"),
        ({"multiplier": 0.5}, "multiplier", 0.5, "must be a finite number >= 1.0"),
        ({"jitter": 1.5}, "jitter", 1.5, "must be a fraction in [0, 1]"),
        ({"retry_for": 0}, "retry_for", 0, "must be > 0 seconds"),
        ({"total_budget": 0}, "total_budget", 0, "must be > 0 seconds"),
        ({"fatal_errors": "ValueError"}, "fatal_errors", "ValueError", NOT_A_LIST),
        ({"retryable_errors": [ValueError, "x"]}, "retryable_errors", "x", "expected an exception class"),
        ({"unknown_errors": "maybe"}, "unknown_errors", "maybe", "one of ['retryable', 'fatal']"),
    ],
)
def test_construction_error_carries_field_value_and_allowed(
    kwargs: dict[str, Any], field: str, value: object, allowed: str
) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        RetryPolicy(**kwargs)
    check_invalid(caught.value, field, value, allowed)


def test_jitter_of_the_wrong_type_names_the_value() -> None:
    with pytest.raises(InvalidPolicy) as caught:
        RetryPolicy(jitter=None)  # type: ignore[arg-type]
    assert (caught.value.field, caught.value.value) == ("jitter", None)
    assert "[0, 1]" in caught.value.allowed


@pytest.mark.parametrize(
    ("kwargs", "field", "limit"),
    [
        ({"max_delay": MAX_DELAY + timedelta(days=1)}, "max_delay", MAX_DELAY),
        ({"retry_for": MAX_BUDGET + timedelta(days=1)}, "retry_for", MAX_BUDGET),
        ({"total_budget": MAX_BUDGET + timedelta(days=1)}, "total_budget", MAX_BUDGET),
    ],
)
def test_too_long_duration_names_the_limit(kwargs: dict[str, Any], field: str, limit: timedelta) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        RetryPolicy(**kwargs)
    assert (caught.value.field, caught.value.value) == (field, kwargs[field])
    assert caught.value.allowed == f"must be at most {limit.days} days ({limit.total_seconds():.0f} s)"


def test_over_budget_error_names_the_budget_given() -> None:
    with pytest.raises(InvalidPolicy) as caught:
        RetryPolicy(max_attempts=4, base_delay=5, multiplier=2, max_delay=20, jitter=0, total_budget=34)
    assert (caught.value.field, caught.value.value) == ("total_budget", 34)


def test_durations_at_their_limit_are_accepted() -> None:
    assert RetryPolicy(base_delay=1, max_delay=MAX_DELAY).max_delay == MAX_DELAY
    # retry_for and total_budget may exceed the one-year cap of a single delay.
    assert RetryPolicy(retry_for=MAX_BUDGET).retry_for == MAX_BUDGET
    assert RetryPolicy(retry_for=timedelta(days=400)).retry_for == timedelta(days=400)
    assert RetryPolicy(total_budget=MAX_BUDGET).total_budget == MAX_BUDGET


@pytest.mark.parametrize(
    ("call", "field", "value", "allowed"),
    [
        (lambda: POLICY.decide(0, ErrorKind.RETRYABLE, 0.5), "attempt", 0, "attempts are numbered from 1"),
        (lambda: POLICY.nominal(-2), "attempt", -2, "attempts are numbered from 1"),
        (lambda: POLICY.backoff_delay(1, 1.5), "sample", 1.5, "a jitter sample in [0, 1]"),
        (
            lambda: POLICY.decide(1, ErrorKind.RETRYABLE, 0.5, max_attempts=0),
            "max_attempts",
            0,
            "must be an integer from 1 to 10000",
        ),
        (
            lambda: POLICY.decide(1, ErrorKind.RETRYABLE, 0.5, requested_delay=timedelta(seconds=-1)),
            "requested_delay",
            timedelta(seconds=-1),
            "must be >= 0 seconds",
        ),
        (lambda: RetryableError("x", delay=-1), "delay", -1, "must be >= 0 seconds"),
        (lambda: RetryableError("x", delay="soon"), "delay", "soon", NOT_SECONDS),  # type: ignore[arg-type]
    ],
)
def test_call_error_carries_field_value_and_allowed(
    call: Callable[[], object], field: str, value: object, allowed: str
) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        call()
    check_invalid(caught.value, field, value, allowed)


def test_invalid_kind_error_lists_the_kinds() -> None:
    with pytest.raises(InvalidPolicy) as caught:
        POLICY.decide(1, "retryable", 0.5)  # type: ignore[arg-type]
    assert (caught.value.field, caught.value.value) == ("kind", "retryable")
    assert caught.value.allowed.startswith("an ErrorKind: one of [")
    assert all(kind.value in caught.value.allowed for kind in ErrorKind)


@pytest.mark.parametrize("zero", [0, 0.0, timedelta(0)])
def test_retryable_error_may_ask_for_an_immediate_retry(zero: float | timedelta) -> None:
    assert RetryableError("now", delay=zero).delay == timedelta(0)


def test_a_zero_requested_delay_retries_at_once() -> None:
    decision = POLICY.decide(1, ErrorKind.RETRYABLE, 0.5, requested_delay=timedelta(0))
    assert decision == Retry(timedelta(0))


def test_schedule_rows_are_complete() -> None:
    s = timedelta(seconds=1)
    assert list(POLICY.schedule()) == [
        ScheduleRow(attempt=1, nominal=10 * s, shortest=5 * s, longest=15 * s, cumulative_longest=15 * s),
        ScheduleRow(attempt=2, nominal=30 * s, shortest=15 * s, longest=45 * s, cumulative_longest=60 * s),
        ScheduleRow(attempt=3, nominal=90 * s, shortest=45 * s, longest=135 * s, cumulative_longest=195 * s),
    ]


def test_distinct_policies_do_not_all_share_one_hash() -> None:
    policies = [RetryPolicy(max_attempts=n) for n in range(1, 21)]
    assert len({hash(p) for p in policies}) > 1
    assert len(set(policies)) == 20


@pytest.mark.parametrize("budget", [0, 1, 100])
def test_requeue_budget_is_kept(budget: int) -> None:
    assert RetryPolicy(requeue_budget=budget).requeue_budget == budget


@pytest.mark.parametrize("budget", [-1, 101, 1.0, True, "1", None])
def test_bad_requeue_budget_names_field_value_and_range(budget: object) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        RetryPolicy(requeue_budget=budget)  # type: ignore[arg-type]
    assert (caught.value.field, caught.value.value) == ("requeue_budget", budget)
    assert caught.value.allowed == "an integer from 0 (never requeue automatically) to 100"


def test_requeue_budget_is_part_of_equality() -> None:
    assert RetryPolicy(requeue_budget=1) != RetryPolicy(requeue_budget=2)
    assert "requeue_budget=3" in repr(RetryPolicy(requeue_budget=3))


@pytest.mark.parametrize("elapsed", [timedelta(seconds=-1), 5])
def test_bad_elapsed_names_field_and_value(elapsed: object) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        POLICY.decide(1, ErrorKind.RETRYABLE, 0.5, elapsed=elapsed)  # type: ignore[arg-type]
    assert (caught.value.field, caught.value.value) == ("elapsed", elapsed)
    assert caught.value.allowed == "a timedelta >= 0 (time since the first attempt), or None"


def test_zero_elapsed_is_allowed() -> None:
    assert isinstance(POLICY.decide(1, ErrorKind.RETRYABLE, 0.5, elapsed=timedelta(0)), Retry)


def test_no_automatic_requeue_by_default() -> None:
    assert RetryPolicy().requeue_budget == 0
