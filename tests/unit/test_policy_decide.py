"""decide(), backoff_delay() and schedule() on concrete examples, including the edges and bad calls."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from django_jobretry import ErrorKind, GiveUp, GiveUpReason, InvalidPolicy, Retry, RetryPolicy
from django_jobretry.policy import RetryableError, ScheduleRow
from tests.unit.invalid_policy import NOT_SECONDS, check_invalid

POLICY = RetryPolicy(max_attempts=5, base_delay=10, multiplier=3, max_delay=100, jitter=0.5)


@pytest.mark.parametrize(
    ("attempt", "nominal"),
    [(1, 10), (2, 30), (3, 90), (4, 100), (5, 100), (10**6, 100)],
)
def test_nominal_is_capped_exponential(attempt: int, nominal: float) -> None:
    assert POLICY.nominal(attempt) == timedelta(seconds=nominal)


@pytest.mark.parametrize(("sample", "seconds"), [(0.0, 15.0), (0.5, 30.0), (1.0, 45.0), (0.75, 37.5)])
def test_sample_maps_linearly_onto_the_jitter_band(sample: float, seconds: float) -> None:
    assert POLICY.backoff_delay(2, sample) == timedelta(seconds=seconds)


def test_huge_attempt_numbers_never_overflow() -> None:
    policy = RetryPolicy(max_attempts=10_000, base_delay=0.001, multiplier=10, max_delay=3600, jitter=1)
    for attempt in (1024, 10**6, 10**18):
        assert policy.backoff_delay(attempt, 1.0) == timedelta(hours=2)
        assert policy.nominal(attempt) == timedelta(hours=1)


def test_multiplier_one_is_a_constant_delay() -> None:
    policy = RetryPolicy(max_attempts=4, base_delay=7, multiplier=1, max_delay=60, jitter=0)
    assert [row.nominal for row in policy.schedule()] == [timedelta(seconds=7)] * 3
    assert policy.worst_case_total() == timedelta(seconds=21)


def test_schedule_rows_are_complete() -> None:
    policy = RetryPolicy(max_attempts=4, base_delay=10, multiplier=3, max_delay=100, jitter=0.5)
    s = timedelta(seconds=1)
    assert list(policy.schedule()) == [
        ScheduleRow(attempt=1, nominal=10 * s, shortest=5 * s, longest=15 * s, cumulative_longest=15 * s),
        ScheduleRow(attempt=2, nominal=30 * s, shortest=15 * s, longest=45 * s, cumulative_longest=60 * s),
        ScheduleRow(attempt=3, nominal=90 * s, shortest=45 * s, longest=135 * s, cumulative_longest=195 * s),
    ]


def test_worst_case_total_matches_the_schedule_when_long() -> None:
    policy = RetryPolicy(max_attempts=10_000, base_delay=1, multiplier=2, max_delay=60, jitter=0.5)
    rows = list(policy.schedule())
    assert len(rows) == 9_999
    assert rows[-1].cumulative_longest == policy.worst_case_total()


def test_retryable_before_the_limit_retries() -> None:
    assert POLICY.decide(4, ErrorKind.RETRYABLE, 0.5) == Retry(timedelta(seconds=100))


def test_the_last_attempt_gives_up_exhausted() -> None:
    assert POLICY.decide(5, ErrorKind.RETRYABLE, 0.5) == GiveUp(GiveUpReason.EXHAUSTED)
    assert POLICY.decide(6, ErrorKind.RETRYABLE, 0.5) == GiveUp(GiveUpReason.EXHAUSTED)


def test_fatal_gives_up_on_the_first_attempt() -> None:
    assert POLICY.decide(1, ErrorKind.FATAL, 0.5) == GiveUp(GiveUpReason.FATAL)


def test_single_attempt_policy_never_retries() -> None:
    policy = RetryPolicy(max_attempts=1, base_delay=1, max_delay=1)
    assert policy.decide(1, ErrorKind.RETRYABLE, 0.5) == GiveUp(GiveUpReason.EXHAUSTED)
    assert list(policy.schedule()) == []
    assert policy.worst_case_total() == timedelta(0)


def test_requested_delay_replaces_backoff_but_not_the_attempt_limit() -> None:
    wanted = timedelta(minutes=30)
    assert POLICY.decide(1, ErrorKind.RETRYABLE, 0.5, requested_delay=wanted) == Retry(wanted)
    assert POLICY.decide(5, ErrorKind.RETRYABLE, 0.5, requested_delay=wanted) == GiveUp(
        GiveUpReason.EXHAUSTED
    )


def test_a_zero_requested_delay_retries_at_once() -> None:
    decision = POLICY.decide(1, ErrorKind.RETRYABLE, 0.5, requested_delay=timedelta(0))
    assert decision == Retry(timedelta(0))


@pytest.mark.parametrize("zero", [0, 0.0, timedelta(0)])
def test_retryable_error_may_ask_for_an_immediate_retry(zero: float | timedelta) -> None:
    assert RetryableError("now", delay=zero).delay == timedelta(0)


class TestDeadline:
    policy = RetryPolicy(max_attempts=100, base_delay=60, multiplier=1, max_delay=60, jitter=0, retry_for=600)

    def test_retries_while_the_next_start_is_within_retry_for(self) -> None:
        decision = self.policy.decide(3, ErrorKind.RETRYABLE, 0.5, elapsed=timedelta(seconds=540))
        assert decision == Retry(timedelta(seconds=60))

    def test_gives_up_when_the_next_start_would_be_too_late(self) -> None:
        decision = self.policy.decide(3, ErrorKind.RETRYABLE, 0.5, elapsed=timedelta(seconds=541))
        assert decision == GiveUp(GiveUpReason.DEADLINE)

    def test_a_requested_delay_counts_against_the_deadline(self) -> None:
        decision = self.policy.decide(
            1, ErrorKind.RETRYABLE, 0.5, elapsed=timedelta(0), requested_delay=timedelta(seconds=601)
        )
        assert decision == GiveUp(GiveUpReason.DEADLINE)

    def test_count_limit_still_applies_within_the_deadline(self) -> None:
        policy = RetryPolicy(max_attempts=2, base_delay=1, max_delay=1, retry_for=3600)
        assert policy.decide(2, ErrorKind.RETRYABLE, 0.5, elapsed=timedelta(0)) == GiveUp(
            GiveUpReason.EXHAUSTED
        )

    def test_without_elapsed_only_the_count_limit_applies(self) -> None:
        assert isinstance(self.policy.decide(50, ErrorKind.RETRYABLE, 0.5), Retry)


@pytest.mark.parametrize("attempt", [0, -1, 1.0, True, None])
def test_invalid_attempt_is_refused(attempt: object) -> None:
    with pytest.raises(InvalidPolicy, match="attempt"):
        POLICY.decide(attempt, ErrorKind.RETRYABLE, 0.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("sample", [-0.1, 1.1, float("nan"), "0.5", True])
def test_invalid_sample_is_refused(sample: object) -> None:
    with pytest.raises(InvalidPolicy, match="sample"):
        POLICY.backoff_delay(1, sample)  # type: ignore[arg-type]


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


def test_invalid_kind_is_refused_naming_the_kinds() -> None:
    with pytest.raises(InvalidPolicy) as caught:
        POLICY.decide(1, "retryable", 0.5)  # type: ignore[arg-type]
    assert str(caught.value).startswith("kind=")
    assert (caught.value.field, caught.value.value) == ("kind", "retryable")
    assert caught.value.allowed.startswith("an ErrorKind: one of [")
    assert all(kind.value in caught.value.allowed for kind in ErrorKind)


def test_the_limit_frozen_on_a_job_wins_over_the_policy() -> None:
    assert POLICY.decide(5, ErrorKind.RETRYABLE, 0.5, max_attempts=6) == Retry(timedelta(seconds=100))
    assert POLICY.decide(2, ErrorKind.RETRYABLE, 0.5, max_attempts=2) == GiveUp(GiveUpReason.EXHAUSTED)
    with pytest.raises(InvalidPolicy, match="max_attempts"):
        POLICY.decide(1, ErrorKind.RETRYABLE, 0.5, max_attempts=0)


@pytest.mark.parametrize("elapsed", [timedelta(seconds=-1), 5])
def test_invalid_elapsed_names_field_and_value(elapsed: object) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        POLICY.decide(1, ErrorKind.RETRYABLE, 0.5, elapsed=elapsed)  # type: ignore[arg-type]
    assert str(caught.value).startswith("elapsed=")
    assert (caught.value.field, caught.value.value) == ("elapsed", elapsed)
    assert caught.value.allowed == "a timedelta >= 0 (time since the first attempt), or None"


def test_zero_elapsed_is_allowed() -> None:
    assert isinstance(POLICY.decide(1, ErrorKind.RETRYABLE, 0.5, elapsed=timedelta(0)), Retry)


@pytest.mark.parametrize(
    "field", ["base_delay", "max_delay", "multiplier", "jitter", "total_budget", "retry_for"]
)
def test_integers_too_large_for_a_float_are_invalid_not_overflow(field: str) -> None:
    kwargs: dict[str, Any] = {field: 10**400}
    with pytest.raises(InvalidPolicy) as caught:
        RetryPolicy(**kwargs)
    assert caught.value.field == field
