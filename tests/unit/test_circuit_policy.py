"""The circuit breaker's pure parts: validation, the reopening cooldown, what counts, the snooze budget.

Each property runs against the real function and against a deliberately
broken one (the negative control), which it must reject.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_jobretry.policy import (
    CircuitBreaker,
    Defer,
    ErrorKind,
    GiveUp,
    GiveUpReason,
    InvalidPolicy,
    RetryPolicy,
)
from django_jobretry.policy.circuit import dotted, next_cooldown

type Cooldown = Callable[[float, float], float]

#: One failure per run, not an ExceptionGroup of several: the negative controls expect an AssertionError.
PROPERTY = settings(max_examples=200, deadline=None, report_multiple_bugs=False)
SECONDS = st.floats(min_value=0.001, max_value=365 * 86400, allow_nan=False, allow_infinity=False)


# -- validation ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mapping", "field", "allowed"),
    [
        ({"failures": 0}, "circuit.failures", "an integer from 1 to 1000000"),
        ({"failures": True}, "circuit.failures", "an integer from 1"),
        ({"failures": 2.5}, "circuit.failures", "an integer from 1"),
        ({"failures": 5, "window": 0}, "circuit.window", "> 0 seconds"),
        ({"failures": 5, "cooldown": -1}, "circuit.cooldown", "> 0 seconds"),
        ({"failures": 5, "cooldown": 60, "max_cooldown": 30}, "circuit.max_cooldown", ">= cooldown (60 s)"),
        ({"failures": 5, "errors": "ValueError"}, "circuit.errors", "a list of exception classes"),
        ({"failures": 5, "errors": [int]}, "circuit.errors", "an exception class"),
        ({"failures": 5, "release_per_second": 0}, "circuit.release_per_second", "> 0"),
        ({"failures": 5, "speed": 1}, "circuit", "unknown key(s)"),
        ({"window": 5}, "circuit", 'needs "failures"'),
    ],
)
def test_a_bad_breaker_names_its_field(mapping: dict[str, Any], field: str, allowed: str) -> None:
    with pytest.raises(InvalidPolicy) as raised:
        RetryPolicy(circuit=mapping)
    assert raised.value.field == field
    assert allowed in raised.value.allowed


def test_defaults_and_a_breaker_value_are_kept() -> None:
    breaker = RetryPolicy(circuit={"failures": 20}).circuit
    assert breaker == CircuitBreaker(
        failures=20,
        window=timedelta(seconds=60),
        cooldown=timedelta(seconds=30),
        max_cooldown=timedelta(seconds=900),
        errors=(),
        release_per_second=10.0,
    )
    assert RetryPolicy(circuit=breaker).circuit is breaker
    assert RetryPolicy().circuit is None


@pytest.mark.parametrize("value", [-1, 100_001, 1.5, True, "3"])
def test_max_snoozes_is_an_integer_in_range(value: object) -> None:
    with pytest.raises(InvalidPolicy, match="max_snoozes"):
        RetryPolicy(max_snoozes=value)  # type: ignore[arg-type]


# -- the reopening cooldown ------------------------------------------------------------------
def cooldown_property(cooldown: Cooldown) -> Callable[[], None]:
    """Never shorter than before unless capped, never past the cap, and at the cap within log2 steps."""

    @PROPERTY
    @given(first=SECONDS, cap=SECONDS)
    def prop(first: float, cap: float) -> None:
        cap = max(cap, first)
        current, steps = first, 0
        while current < cap:
            following = cooldown(current, cap)
            assert following > current, (current, following)
            assert following <= cap, (following, cap)
            current, steps = following, steps + 1
            assert steps <= math.ceil(math.log2(cap / first)) + 1, "the cap is never reached"
        assert cooldown(cap, cap) == cap

    return prop


def test_the_cooldown_doubles_up_to_its_cap() -> None:
    cooldown_property(next_cooldown)()
    assert next_cooldown(30, 900) == 60
    assert next_cooldown(600, 900) == 900


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(lambda current, cap: current * 2, id="uncapped"),
        pytest.param(lambda current, cap: current, id="never grows"),
        pytest.param(lambda current, cap: min(current + 1e-9, cap), id="crawls"),
    ],
)
def test_the_cooldown_property_catches_a_broken_one(broken: Cooldown) -> None:
    with pytest.raises(AssertionError):
        cooldown_property(broken)()


# -- what counts -----------------------------------------------------------------------------
class PartnerDown(ConnectionError):
    pass


def counts_property(counts: Callable[[CircuitBreaker, ErrorKind, list[str]], bool]) -> Callable[[], None]:
    """Fatal never counts; no ``errors``: every retryable one does; else only those and subclasses."""
    classes = [ValueError, ConnectionError, PartnerDown, TimeoutError]

    @PROPERTY
    @given(
        listed=st.lists(st.sampled_from(classes), max_size=3, unique=True),
        raised=st.sampled_from(classes),
        kind=st.sampled_from(ErrorKind),
    )
    def prop(listed: list[type[BaseException]], raised: type[BaseException], kind: ErrorKind) -> None:
        breaker = CircuitBreaker.from_mapping({"failures": 3, "errors": listed})
        names = [dotted(klass) for klass in raised.__mro__]
        expected = kind is ErrorKind.RETRYABLE and (not listed or any(issubclass(raised, k) for k in listed))
        assert counts(breaker, kind, names) is expected

    return prop


def test_what_counts_towards_opening() -> None:
    counts_property(lambda breaker, kind, names: breaker.counts(kind, names))()


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(
            lambda breaker, kind, names: not breaker.errors or dotted(breaker.errors[0]) in names,
            id="fatal counts",
        ),
        pytest.param(lambda breaker, kind, names: kind is ErrorKind.RETRYABLE, id="errors ignored"),
        pytest.param(
            lambda breaker, kind, names: (
                kind is ErrorKind.RETRYABLE and (not breaker.errors or dotted(breaker.errors[0]) == names[0])
            ),
            id="subclasses missed",
        ),
    ],
)
def test_the_counts_property_catches_a_broken_one(broken: Callable[..., bool]) -> None:
    with pytest.raises(AssertionError):
        counts_property(broken)()


def test_a_child_process_failure_counts_by_its_class_name() -> None:
    breaker = CircuitBreaker.from_mapping({"failures": 3, "errors": [ConnectionError]})
    assert breaker.counts(
        ErrorKind.RETRYABLE, ["django_jobretry.exceptions.ChildFailed", "builtins.ConnectionError"]
    )
    assert not breaker.counts(ErrorKind.RETRYABLE, ["django_jobretry.exceptions.ChildFailed"])


# -- the snooze budget -----------------------------------------------------------------------
@settings(deadline=None)  # Hypothesis's 200 ms per example: a loaded machine's pause is no failure
@given(budget=st.integers(min_value=0, max_value=50), snoozes=st.integers(min_value=0, max_value=100))
def test_a_job_snoozes_exactly_max_snoozes_times(budget: int, snoozes: int) -> None:
    decision = RetryPolicy(max_snoozes=budget).defer(snoozes, timedelta(seconds=5))
    if snoozes < budget:
        assert decision == Defer(timedelta(seconds=5))
    else:
        assert decision == GiveUp(GiveUpReason.SNOOZE_BUDGET)
