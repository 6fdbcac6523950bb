"""The policy's ``requeue_budget``: none by default, validated naming its range, kept, part of equality."""

from __future__ import annotations

import pytest

from django_jobretry import InvalidPolicy, RetryPolicy


def test_no_automatic_requeue_by_default() -> None:
    assert RetryPolicy().requeue_budget == 0


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
