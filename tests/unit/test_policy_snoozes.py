"""The snooze budget of a policy (policy/decisions.py): a count, a time, or both, the first spent ends it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_jobretry.policy import Defer, GiveUp, GiveUpReason, InvalidPolicy, RetryPolicy
from django_jobretry.policy.decisions import DEFAULT_SNOOZES, MAX_SNOOZES

SPENT = GiveUp(GiveUpReason.SNOOZE_BUDGET)


def test_without_a_time_the_count_is_twenty() -> None:
    policy = RetryPolicy()
    assert (policy.max_snoozes, policy.snooze_for) == (DEFAULT_SNOOZES, None)
    assert policy.defer(19, timedelta(seconds=5)) == Defer(timedelta(seconds=5))
    assert policy.defer(20, timedelta(seconds=5)) == SPENT


def test_a_time_alone_is_the_budget_and_the_count_is_only_the_ceiling() -> None:
    policy = RetryPolicy(snooze_for=timedelta(hours=6))
    assert (policy.max_snoozes, policy.snooze_for) == (MAX_SNOOZES, timedelta(hours=6))
    five = timedelta(seconds=5)
    assert policy.defer(4319, five, snoozed=timedelta(hours=6) - five) == Defer(five)
    assert policy.defer(4320, five, snoozed=timedelta(hours=6)) == SPENT


def test_with_both_the_first_spent_ends_it() -> None:
    policy = RetryPolicy(max_snoozes=5, snooze_for=60)
    half = timedelta(seconds=30)
    assert policy.defer(5, half) == SPENT
    assert policy.defer(1, half, snoozed=timedelta(seconds=31)) == SPENT
    assert policy.defer(4, half, snoozed=half) == Defer(half)


@pytest.mark.parametrize("value", [0, -1, float("nan"), True, "6h", timedelta(days=36_501)])
def test_a_bad_time_is_refused_naming_snooze_for(value: object) -> None:
    with pytest.raises(InvalidPolicy, match="snooze_for") as refused:
        RetryPolicy(snooze_for=value)  # type: ignore[arg-type]
    assert refused.value.field == "snooze_for"


@settings(deadline=None)  # Hypothesis's 200 ms per example: a loaded machine's pause is no failure
@given(
    budget=st.floats(min_value=0.001, max_value=3600),
    delays=st.lists(st.floats(min_value=0, max_value=600), max_size=60),
)
def test_the_snoozes_let_through_never_add_up_past_the_time(budget: float, delays: list[float]) -> None:
    policy = RetryPolicy(snooze_for=budget)
    snoozes, snoozed = 0, timedelta(0)
    for seconds in delays:
        delay = timedelta(seconds=seconds)
        if isinstance(policy.defer(snoozes, delay, snoozed), GiveUp):
            break
        snoozes, snoozed = snoozes + 1, snoozed + delay
    assert snoozed <= timedelta(seconds=budget)
