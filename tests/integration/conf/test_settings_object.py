"""The settings object reads JOBRETRY lazily, so override_settings just works."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings

from django_jobretry.conf import jobretry_settings
from django_jobretry.exceptions import InvalidSettings, UnknownPolicy
from django_jobretry.policy import RetryPolicy
from example_project.shop.errors import InvalidAddress


def test_default_policy_always_exists() -> None:
    with override_settings(JOBRETRY={"POLICIES": {"emails": {"max_attempts": 2}}}):
        assert jobretry_settings.policy("default") == RetryPolicy()
        assert jobretry_settings.policy("emails").max_attempts == 2


def test_missing_fields_fall_back_to_the_defaults() -> None:
    with override_settings(JOBRETRY={"POLICIES": {"quick": {"max_attempts": 3}}}):
        policy = jobretry_settings.policy("quick")
    assert policy == RetryPolicy(max_attempts=3)


def test_dotted_error_paths_are_resolved() -> None:
    policy = jobretry_settings.policy("emails")
    assert policy.fatal_errors == (InvalidAddress,)
    assert policy.retry_for == timedelta(hours=2)


def test_override_settings_is_seen_without_restart() -> None:
    before = jobretry_settings.policy("default")
    with override_settings(JOBRETRY={"POLICIES": {"default": {"max_attempts": 7}}}):
        assert jobretry_settings.policy("default").max_attempts == 7
    assert jobretry_settings.policy("default") == before


def test_invalid_settings_raise_with_the_check_id() -> None:
    with (
        override_settings(JOBRETRY={"POLICIES": {"default": {"jitter": -1}}}),
        pytest.raises(InvalidSettings, match=r'django_jobretry\.E005: .*\["jitter"\] = -1'),
    ):
        _ = jobretry_settings.policies


def test_unknown_policy_lists_the_known_ones() -> None:
    with pytest.raises(
        UnknownPolicy,
        match=(
            r"unknown retry policy 'nope'; .* "
            r"\['default', 'demo', 'emails', 'partner', 'q2', 'q2-two', 'three'\]"
        ),
    ):
        jobretry_settings.policy("nope")
