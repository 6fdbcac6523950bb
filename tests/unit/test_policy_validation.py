"""Construction: every bad parameter fails with InvalidPolicy naming its field, value and what is allowed."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest

from django_jobretry import InvalidPolicy, RetryPolicy
from django_jobretry.policy import ErrorKind
from django_jobretry.policy.decisions import MAX_ATTEMPTS_LIMIT
from django_jobretry.policy.errors import MAX_BUDGET, MAX_DELAY
from tests.unit.invalid_policy import NOT_SECONDS, check_invalid

NOT_A_LIST = "expected a list of exception classes"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": -3}, "max_attempts"),
        ({"max_attempts": 2.0}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"max_attempts": MAX_ATTEMPTS_LIMIT + 1}, "max_attempts"),
        ({"base_delay": -1}, "base_delay"),
        ({"base_delay": 0}, "base_delay"),
        ({"base_delay": timedelta(seconds=-5)}, "base_delay"),
        ({"base_delay": 1e-9}, "base_delay"),
        ({"base_delay": math.nan}, "base_delay"),
        ({"base_delay": "10"}, "base_delay"),
        ({"max_delay": math.inf}, "max_delay"),
        ({"max_delay": timedelta(days=366)}, "max_delay"),
        ({"base_delay": 60, "max_delay": 30}, "max_delay"),
        ({"multiplier": 0.99}, "multiplier"),
        ({"multiplier": math.nan}, "multiplier"),
        ({"multiplier": None}, "multiplier"),
        ({"jitter": -0.01}, "jitter"),
        ({"jitter": 1.01}, "jitter"),
        ({"jitter": "0.5"}, "jitter"),
        ({"total_budget": 0}, "total_budget"),
        ({"total_budget": 60}, "total_budget"),  # the default schedule needs about a day
        ({"total_budget": timedelta(days=40_000)}, "total_budget"),
        ({"retry_for": -1}, "retry_for"),
        ({"fatal_errors": ValueError}, "fatal_errors"),
        ({"fatal_errors": "ValueError"}, "fatal_errors"),
        ({"retryable_errors": [ValueError, "x"]}, "retryable_errors"),
        ({"retryable_errors": [int]}, "retryable_errors"),
        ({"unknown_errors": "maybe"}, "unknown_errors"),
    ],
)
def test_bad_parameter_names_its_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        RetryPolicy(**kwargs)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}=")
    assert isinstance(caught.value, ValueError)


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


def test_durations_at_their_limit_are_accepted() -> None:
    assert RetryPolicy(base_delay=1, max_delay=MAX_DELAY).max_delay == MAX_DELAY
    # retry_for and total_budget may exceed the one-year cap of a single delay.
    assert RetryPolicy(retry_for=MAX_BUDGET).retry_for == MAX_BUDGET
    assert RetryPolicy(retry_for=timedelta(days=400)).retry_for == timedelta(days=400)
    assert RetryPolicy(total_budget=MAX_BUDGET).total_budget == MAX_BUDGET


def test_over_budget_error_names_the_budget_given() -> None:
    with pytest.raises(InvalidPolicy) as caught:
        RetryPolicy(max_attempts=4, base_delay=5, multiplier=2, max_delay=20, jitter=0, total_budget=34)
    assert (caught.value.field, caught.value.value) == ("total_budget", 34)


def test_over_budget_message_gives_the_worst_case() -> None:
    with pytest.raises(InvalidPolicy, match=r"3 retries at full jitter\) totals 35 s"):
        RetryPolicy(max_attempts=4, base_delay=5, multiplier=2, max_delay=20, jitter=0, total_budget=34)
    with pytest.raises(InvalidPolicy, match=r"\(1 retry at full jitter\) totals 5 s"):
        RetryPolicy(max_attempts=2, base_delay=5, jitter=0, total_budget=4)


def test_budget_exactly_met_is_accepted() -> None:
    policy = RetryPolicy(max_attempts=4, base_delay=5, multiplier=2, max_delay=20, jitter=0, total_budget=35)
    assert policy.worst_case_total() == timedelta(seconds=35)
    assert policy.total_budget == timedelta(seconds=35)


def test_durations_accept_seconds_and_timedelta_alike() -> None:
    as_seconds = RetryPolicy(base_delay=1.5, max_delay=90, retry_for=3600)
    as_timedelta = RetryPolicy(
        base_delay=timedelta(seconds=1.5), max_delay=timedelta(minutes=1.5), retry_for=timedelta(hours=1)
    )
    assert as_seconds == as_timedelta
    assert hash(as_seconds) == hash(as_timedelta)
    assert as_seconds.base_delay == timedelta(seconds=1.5)
    assert as_seconds.retry_for == timedelta(hours=1)


def test_defaults_are_the_documented_production_policy() -> None:
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.multiplier, policy.jitter) == (20, 2.0, 0.25)
    assert (policy.base_delay, policy.max_delay) == (timedelta(seconds=15), timedelta(hours=2))
    assert policy.unknown_errors is ErrorKind.RETRYABLE
    assert timedelta(hours=27) < policy.worst_case_total() < timedelta(hours=28)


def test_policy_is_immutable() -> None:
    policy = RetryPolicy()
    with pytest.raises(AttributeError, match="immutable"):
        policy.max_attempts = 3


def test_unknown_errors_accepts_its_string_value() -> None:
    assert RetryPolicy(unknown_errors="fatal").unknown_errors is ErrorKind.FATAL


def test_repr_shows_every_parameter() -> None:
    text = repr(RetryPolicy(max_attempts=3))
    assert text.startswith("RetryPolicy(max_attempts=3, base_delay=")
    assert "unknown_errors=" in text
    assert "_uncapped" not in text


def test_different_policies_are_not_equal() -> None:
    assert RetryPolicy(max_attempts=3) != RetryPolicy(max_attempts=4)
    assert RetryPolicy() != object()


def test_distinct_policies_do_not_all_share_one_hash() -> None:
    policies = [RetryPolicy(max_attempts=n) for n in range(1, 21)]
    assert len({hash(p) for p in policies}) > 1
    assert len(set(policies)) == 20
