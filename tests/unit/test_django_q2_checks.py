"""The django-q2 adapter's system checks: each bad value gets its own id and says why."""

from __future__ import annotations

import sys
from typing import Any
from unittest.mock import patch

import pytest
from django.conf import settings
from django.test import override_settings

from django_jobretry.contrib.django_q2 import retry_policy
from django_jobretry.contrib.django_q2.apps import check_django_q2, cluster_problems

GOOD = {"name": "c", "orm": "default", "max_attempts": 0, "timeout": 60, "retry": 90}
REDIS = {"name": "c", "redis": {"host": "127.0.0.1", "port": 6379, "db": 0}, "timeout": 60}


def ids(cluster: dict[str, Any]) -> list[str]:
    return [problem.id or "" for problem in cluster_problems(cluster)]


def test_the_recommended_clusters_and_the_test_settings_pass() -> None:
    assert ids(GOOD) == []
    assert ids(REDIS) == []
    assert check_django_q2() == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"redis": {"host": "127.0.0.1"}}, "E033"),
        ({"sqs": {"aws_region": "eu-west-1"}}, "E033"),
        ({"orm": "other"}, "E037"),
        ({"max_attempts": 5}, "E034"),
        ({"timeout": None}, "E035"),
        ({"timeout": 90}, "E035"),
        ({"timeout": 120, "retry": 60}, "E035"),
        ({"sync": True}, "E036"),
        ({"ack_failures": True}, "W030"),
    ],
)
def test_each_incompatible_value_has_its_id(change: dict[str, Any], expected: str) -> None:
    assert ids({**GOOD, **change}) == [f"django_jobretry.{expected}"]


def test_messages_name_the_value_and_the_reason() -> None:
    (problem,) = cluster_problems({**GOOD, "max_attempts": 5})
    assert 'max_attempts"] = 5' in problem.msg
    assert "deletes" in problem.msg
    assert "= 0" in (problem.hint or "")


def test_no_cluster_at_all() -> None:
    assert [p.id for p in cluster_problems(None)] == ["django_jobretry.E033"]


@pytest.mark.parametrize(
    ("broker", "name"),
    [
        ({"sqs": {"aws_region": "eu-west-1"}}, "'sqs'"),
        ({"mongo": {"host": "127.0.0.1"}}, "'mongo'"),
        ({"iron_mq": {"token": "t"}}, "'iron_mq'"),
        ({"broker_class": "myapp.brokers.Custom"}, "'broker_class'"),
    ],
)
def test_other_brokers_are_refused_naming_the_supported_ones(broker: dict[str, Any], name: str) -> None:
    (problem,) = cluster_problems({"name": "c", "timeout": 60, **broker})
    assert problem.id == "django_jobretry.E033"
    assert name in problem.msg
    assert '"orm"' in problem.msg
    assert '"redis"' in problem.msg


@pytest.mark.parametrize(
    "cluster",
    [
        REDIS,
        {"name": "c"},  # no broker named: django-q2's default, Redis on localhost
        {"name": "c", "django_redis": "default"},
        # Redis never redelivers: max_attempts, retry and ack_failures do nothing there.
        {**REDIS, "max_attempts": 3, "retry": 10, "ack_failures": True},
        {**REDIS, "timeout": None},
    ],
)
def test_the_redis_broker_is_accepted(cluster: dict[str, Any]) -> None:
    assert ids(cluster) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [({"scheduler": False}, "E038"), ({"sync": True}, "E036"), ({"orm": "default"}, "E033")],
)
def test_what_the_redis_broker_cannot_work_with(change: dict[str, Any], expected: str) -> None:
    assert ids({**REDIS, **change}) == [f"django_jobretry.{expected}"]


def test_without_its_scheduler_a_redis_cluster_never_retries() -> None:
    (problem,) = cluster_problems({**REDIS, "scheduler": False})
    assert "Schedule" in problem.msg
    assert "no retry ever runs" in problem.msg


def test_the_redis_broker_needs_the_redis_package() -> None:
    with patch.dict(sys.modules, {"redis": None}):  # import redis raises ImportError
        (problem,) = cluster_problems(REDIS)
    assert (problem.id, problem.hint) == ("django_jobretry.E033", "pip install redis")


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"POLICY": "nope"}, "E031"),
        ({"POLICY": 3}, "E030"),
        ({"POLICY": "q2", "X": 1}, "E030"),
        ("q2", "E030"),
    ],
)
def test_the_setting_is_checked(section: object, expected: str) -> None:
    with override_settings(JOBRETRY={**settings.JOBRETRY, "DJANGO_Q2": section}):
        assert [p.id for p in check_django_q2()] == [f"django_jobretry.{expected}"]


def test_the_app_must_come_after_django_q_and_django_jobretry() -> None:
    apps = [a for a in settings.INSTALLED_APPS if a != "django_q"]
    with override_settings(INSTALLED_APPS=apps):
        assert "django_jobretry.E032" in [p.id for p in check_django_q2()]


def test_retry_policy_takes_a_name_or_none() -> None:
    with pytest.raises(TypeError, match="policy name or None"):
        retry_policy(3)  # type: ignore[arg-type]


def test_a_django_q2_without_post_execute_in_worker_is_too_old(monkeypatch: pytest.MonkeyPatch) -> None:
    """django-q2 before 1.10 has no post_execute_in_worker: the adapter connects nothing and says why."""
    from django_q import signals

    monkeypatch.delattr(signals, "post_execute_in_worker")
    (problem,) = [p for p in check_django_q2(None) if p.id == "django_jobretry.E032"]
    assert "is too old for the adapter: it needs 1.10 or newer" in problem.msg
    assert problem.hint == "pip install 'django-q2>=1.10,<2'"
