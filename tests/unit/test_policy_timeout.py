"""The policy's ``timeout``: validated like the other durations, kept, and part of equality."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_jobretry import InvalidPolicy, RetryPolicy


def test_no_timeout_by_default() -> None:
    assert RetryPolicy().timeout is None


@pytest.mark.parametrize(
    ("given", "kept"), [(30, timedelta(seconds=30)), (timedelta(minutes=2), timedelta(minutes=2))]
)
def test_a_timeout_is_kept_as_a_timedelta(given: float | timedelta, kept: timedelta) -> None:
    assert RetryPolicy(timeout=given).timeout == kept


@pytest.mark.parametrize("bad", [0, -1, "30", True, float("inf"), timedelta(days=366)])
def test_a_bad_timeout_names_the_field(bad: object) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        RetryPolicy(timeout=bad)  # type: ignore[arg-type]
    assert (caught.value.field, caught.value.value) == ("timeout", bad)


def test_timeout_is_part_of_equality_and_repr() -> None:
    assert RetryPolicy(timeout=30) == RetryPolicy(timeout=30)
    assert RetryPolicy(timeout=30) != RetryPolicy(timeout=31)
    assert hash(RetryPolicy(timeout=30)) == hash(RetryPolicy(timeout=30))
    assert "timeout=datetime.timedelta(seconds=30)" in repr(RetryPolicy(timeout=30))
