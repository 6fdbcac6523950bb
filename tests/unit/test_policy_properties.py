"""Policy invariants 1-4 (docs/design.md#invariant-1 to 4) as hypothesis properties, each with a control.

Every property is built by a factory taking the policy class, so the very same
property runs against RetryPolicy (must pass) and against a deliberately
broken policy from broken_policies.py (must fail). A property that cannot
tell the two apart would be shown up by its control.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import assume, event, find, given, settings, target
from hypothesis import strategies as st

from django_jobretry.policy import ErrorKind, GiveUp, GiveUpReason, InvalidPolicy, Retry, RetryPolicy
from django_jobretry.policy.errors import MAX_BUDGET
from tests.unit import spec_formulas as spec
from tests.unit.broken_policies import (
    JitterIgnoredInBoundsPolicy,
    OffByOnePolicy,
    ShrinkingPolicy,
    UncappedPolicy,
    WeakBudgetPolicy,
)
from tests.unit.strategies import policy_params, samples

type Property = Callable[[], None]
PROPERTY_SETTINGS = settings(max_examples=300, deadline=None, database=None, report_multiple_bugs=False)


def seconds(delay: timedelta) -> float:
    return delay.total_seconds()


def delay_of(policy: RetryPolicy, attempt: int, sample: float) -> float:
    """backoff_delay in seconds; an overflow is a violated invariant, not a crash."""
    try:
        return seconds(policy.backoff_delay(attempt, sample))
    except OverflowError as exc:
        raise AssertionError(f"backoff_delay({attempt}, {sample}) overflowed") from exc


# -- 1. Bounds: nominal(a)*(1-jitter) <= delay <= nominal(a)*(1+jitter) ------------


def bounds_property(policy_class: type[RetryPolicy]) -> Property:
    @PROPERTY_SETTINGS
    @given(params=policy_params(), attempt=st.integers(1, 100), sample=samples)
    def prop(params: dict[str, Any], attempt: int, sample: float) -> None:
        policy = policy_class(**params)
        nominal = spec.nominal(params, attempt)
        capped = nominal >= params["max_delay"]
        event("capped" if capped else "uncapped")
        target(float(capped), label="capped attempts drawn")
        delay = delay_of(policy, attempt, sample)
        low, high = nominal * (1 - params["jitter"]), nominal * (1 + params["jitter"])
        assert low - spec.TOLERANCE <= delay <= high + spec.TOLERANCE, (low, delay, high)
        # And the exact formula, not only the band.
        expected = nominal * (1 + params["jitter"] * (2 * sample - 1))
        assert spec.close_enough(delay, expected), (delay, expected)
        # The policy's own bounds() bracket the delay with no tolerance at all.
        shortest, longest = policy.bounds(attempt)
        assert seconds(shortest) <= delay <= seconds(longest)

    return prop


def test_bounds() -> None:
    bounds_property(RetryPolicy)()


@pytest.mark.parametrize("broken", [UncappedPolicy, JitterIgnoredInBoundsPolicy])
def test_bounds_rejects_broken_policy(broken: type[RetryPolicy]) -> None:
    with pytest.raises(AssertionError):
        bounds_property(broken)()


# -- 2. Budget: over-budget policies cannot be built; built ones respect it -------


def budget_property(policy_class: type[RetryPolicy]) -> Property:
    @PROPERTY_SETTINGS
    @given(params=policy_params(), slack=st.floats(min_value=0.05, max_value=2.0))
    def prop(params: dict[str, Any], slack: float) -> None:
        worst = spec.worst_case_total(params)
        # Budgets from 5 % to 200 % of the worst case: both sides of the line.
        budget = max(worst * slack, 0.001)
        assume(budget <= MAX_BUDGET.total_seconds())  # larger budgets are refused for their size
        try:
            policy = policy_class(**params, total_budget=budget)
        except InvalidPolicy as exc:
            refused: InvalidPolicy | None = exc
        else:
            refused = None
        if refused is not None:
            event("budget rejected")
            assert refused.field == "total_budget"
            assert worst > budget * (1 - 1e-9), "a policy within budget was refused"
            return
        event("budget accepted")
        assert policy.total_budget is not None
        longest = sum((policy.backoff_delay(a, 1.0) for a in range(1, params["max_attempts"])), timedelta(0))
        assert longest <= policy.total_budget, (longest, policy.total_budget)
        assert worst <= budget * (1 + 1e-9) + spec.TOLERANCE * params["max_attempts"]

    return prop


def test_budget() -> None:
    budget_property(RetryPolicy)()


def test_budget_rejects_weakened_check() -> None:
    with pytest.raises(AssertionError):
        budget_property(WeakBudgetPolicy)()


# -- 3. Growth: with s = 0.5 delays never decrease, constant once capped ------------


def growth_property(policy_class: type[RetryPolicy]) -> Property:
    @PROPERTY_SETTINGS
    @given(params=policy_params())
    def prop(params: dict[str, Any]) -> None:
        policy = policy_class(**params)
        delays = [delay_of(policy, a, 0.5) for a in range(1, 101)]
        for attempt, (before, after) in enumerate(itertools.pairwise(delays), start=1):
            assert after >= before, f"delay after attempt {attempt + 1} shrank: {before} -> {after}"
        capped = [d for a, d in enumerate(delays, start=1) if spec.nominal(params, a) >= params["max_delay"]]
        event("cap reached" if capped else "cap never reached")
        for delay in capped:
            assert spec.close_enough(delay, params["max_delay"]), (delay, params["max_delay"])

    return prop


def test_growth() -> None:
    growth_property(RetryPolicy)()


@pytest.mark.parametrize("broken", [UncappedPolicy, ShrinkingPolicy])
def test_growth_rejects_broken_policy(broken: type[RetryPolicy]) -> None:
    with pytest.raises(AssertionError):
        growth_property(broken)()


# -- 4. Totality: Retry exactly when retryable and attempt < max_attempts ----------


def totality_property(policy_class: type[RetryPolicy]) -> Property:
    @PROPERTY_SETTINGS
    @given(
        params=policy_params(),
        attempt=st.integers(1, 110),
        kind=st.sampled_from(ErrorKind),
        sample=samples,
    )
    def prop(params: dict[str, Any], attempt: int, kind: ErrorKind, sample: float) -> None:
        policy = policy_class(**params)
        decision = policy.decide(attempt, kind, sample)
        if kind is ErrorKind.FATAL:
            assert decision == GiveUp(GiveUpReason.FATAL)
        elif attempt >= params["max_attempts"]:
            event("attempt at or past the limit")
            assert decision == GiveUp(GiveUpReason.EXHAUSTED)
        else:
            event("retry expected")
            assert isinstance(decision, Retry)
            assert decision.delay == policy.backoff_delay(attempt, sample)

    return prop


def test_totality() -> None:
    totality_property(RetryPolicy)()


def test_totality_rejects_off_by_one() -> None:
    with pytest.raises(AssertionError):
        totality_property(OffByOnePolicy)()


# -- The generators reach every case the properties distinguish ----------------------


@pytest.mark.parametrize(
    "condition",
    [
        pytest.param(lambda p: spec.nominal(p, p["max_attempts"]) >= p["max_delay"], id="capped"),
        pytest.param(lambda p: spec.nominal(p, p["max_attempts"]) < p["max_delay"], id="uncapped"),
        pytest.param(lambda p: p["max_attempts"] == 1, id="single-attempt"),
        pytest.param(lambda p: p["jitter"] > 0.9, id="heavy-jitter"),
    ],
)
def test_generator_reaches(condition: Callable[[dict[str, Any]], bool]) -> None:
    """If the strategy never produced a case, a property about it would pass vacuously."""
    assert condition(find(policy_params(), condition, settings=settings(database=None)))
