"""Check messages a pip user can act on: "did you mean", and hints that need no repository docs.

A pip install has no docs/ directory, so no hint may point there: each says
what is allowed (or the default) itself, or names help the installed
package gives (``manage.py showpolicies``, ``python -m pydoc``).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.checks import check_settings
from django_jobretry.conf.databases import check_transaction_pooling
from django_jobretry.contrib.django_q2.apps import check_django_q2, cluster_problems
from django_jobretry.exceptions import UnknownPolicy

EVERY_MISTAKE: dict[str, Any] = {
    "POLICY": {},
    "LEASE_SECONDS": 0,
    "LISTEN_DATABASE": "",
    "TASK_MODULES": "shop.jobs",
    "POLICIES": {
        "emails": {"max_atempts": 3, "jitter": 2, "fatal_errors": ["smtplib.SMTPRecipientRefused"]},
        "both": {"fatal_errors": ["builtins.KeyError"], "retryable_errors": ["builtins.KeyError"]},
    },
}


def test_no_settings_hint_points_at_the_repository_docs() -> None:
    with override_settings(JOBRETRY=EVERY_MISTAKE):
        found = check_settings()
    assert len({str(e.id) for e in found}) >= 7, found
    assert [e.hint for e in found if "docs/" in (e.hint or "") or ".md" in (e.hint or "")] == []


def test_the_hint_of_a_bad_value_names_its_default() -> None:
    with override_settings(JOBRETRY={"LEASE_SECONDS": 0, "POLICIES": {"emails": {"jitter": 2}}}):
        hints = {str(e.id): e.hint for e in check_settings()}
    assert hints["django_jobretry.E007"] == "Default: 60; leave the key out to use it."
    assert hints["django_jobretry.E005"] is not None
    assert hints["django_jobretry.E005"].startswith("Default for 'jitter': 0.25; leave the field out")
    assert "manage.py showpolicies" in hints["django_jobretry.E005"]


def test_pooling_hints_name_the_installed_modules_help(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(settings.DATABASES["default"], "DISABLE_SERVER_SIDE_CURSORS", True)
    hints = [w.hint or "" for w in check_transaction_pooling()]
    assert len(hints) == 2
    assert all(
        "python -m pydoc django_jobretry.conf.databases" in hint and "docs/" not in hint for hint in hints
    )


def test_e006_suggests_a_close_exception_class_of_the_same_module() -> None:
    with override_settings(
        JOBRETRY={"POLICIES": {"emails": {"fatal_errors": ["smtplib.SMTPRecipientRefused"]}}}
    ):
        [error] = check_settings()
    assert error.id == "django_jobretry.E006"
    assert error.msg.endswith("Did you mean 'smtplib.SMTPRecipientsRefused'?")


def test_e006_suggests_nothing_when_the_module_does_not_import() -> None:
    with override_settings(JOBRETRY={"POLICIES": {"emails": {"fatal_errors": ["no_such_module.Error"]}}}):
        [error] = check_settings()
    assert "Did you mean" not in error.msg


def test_e031_suggests_the_policy() -> None:
    with override_settings(JOBRETRY={**settings.JOBRETRY, "DJANGO_Q2": {"POLICY": "q2_two"}}):
        [error] = check_django_q2()
    assert error.id == "django_jobretry.E031"
    assert error.msg.endswith("is not a policy in POLICIES. Did you mean 'q2-two'?")


def test_unknown_policy_suggests_the_close_name() -> None:
    with pytest.raises(UnknownPolicy) as raised:
        jobretry_settings.policy("thre")
    assert str(raised.value).endswith("'q2', 'q2-two', 'three']. Did you mean 'three'?")


@pytest.mark.parametrize(
    ("cluster", "fragment"),
    [
        (None, 'needs the ORM broker ("orm") or the Redis broker ("redis")'),
        (
            {"name": "c", "sqs": {"aws_region": "eu-west-1"}},
            'works only with the ORM broker ("orm") or the Redis broker',
        ),
        ({"name": "c", "mongo": {"host": "h"}}, 'or the Redis broker ("redis")'),
    ],
)
def test_e033_says_one_broker_or_the_other(cluster: Any, fragment: str) -> None:
    [error] = [p for p in cluster_problems(cluster) if p.id == "django_jobretry.E033"]
    assert fragment in error.msg
    assert " and the Redis broker" not in error.msg
