"""Error classification: explicit raises, listed classes by specificity, default."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_jobretry import ErrorKind, FatalError, InvalidPolicy, RetryableError, RetryPolicy
from django_jobretry.policy import Classification


class UpstreamError(Exception):
    pass


class UpstreamTimeout(UpstreamError):
    pass


def test_fatal_error_is_fatal_even_if_listed_retryable() -> None:
    policy = RetryPolicy(retryable_errors=[FatalError])
    assert policy.classify(FatalError("bad payload")) == Classification(ErrorKind.FATAL)


def test_retryable_error_carries_its_requested_delay() -> None:
    error = RetryableError("rate limited", delay=30)
    assert RetryPolicy().classify(error) == Classification(ErrorKind.RETRYABLE, timedelta(seconds=30))


def test_retryable_error_without_delay() -> None:
    assert RetryPolicy().classify(RetryableError()) == Classification(ErrorKind.RETRYABLE, None)


@pytest.mark.parametrize("delay", [-1, "soon", float("inf")])
def test_retryable_error_rejects_a_bad_delay(delay: object) -> None:
    with pytest.raises(InvalidPolicy, match="delay"):
        RetryableError("x", delay=delay)  # type: ignore[arg-type]


def test_listed_fatal_class_and_its_subclasses_are_fatal() -> None:
    policy = RetryPolicy(fatal_errors=[UpstreamError])
    assert policy.classify(UpstreamTimeout()).kind is ErrorKind.FATAL


def test_most_specific_listed_class_wins_whatever_the_list_order() -> None:
    policy = RetryPolicy(fatal_errors=[UpstreamError], retryable_errors=[UpstreamTimeout])
    assert policy.classify(UpstreamTimeout()).kind is ErrorKind.RETRYABLE
    assert policy.classify(UpstreamError()).kind is ErrorKind.FATAL
    inverted = RetryPolicy(fatal_errors=[UpstreamTimeout], retryable_errors=[UpstreamError])
    assert inverted.classify(UpstreamTimeout()).kind is ErrorKind.FATAL


@pytest.mark.parametrize("default", list(ErrorKind))
def test_unlisted_errors_follow_unknown_errors(default: ErrorKind) -> None:
    policy = RetryPolicy(unknown_errors=default, fatal_errors=[KeyError])
    assert policy.classify(ZeroDivisionError()).kind is default
