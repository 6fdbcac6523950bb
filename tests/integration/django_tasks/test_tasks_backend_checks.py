"""JobRetryBackend's configuration: system checks E020-E024, and loading it touches no database.

Django 6+ only (tests/conftest.py leaves this module out on Django 5.2).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.tasks import task, task_backends
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from django_jobretry.backends import JobRetryBackend, retry_policy
from django_jobretry.exceptions import InvalidJob
from django_jobretry.models import Job
from django_jobretry.registry import registry
from tests.jobs_app import tasks
from tests.processes import ROOT

PATH = "django_jobretry.backends.JobRetryBackend"


def backend(options: Any = None, queues: Any = None) -> JobRetryBackend:
    params: dict[str, Any] = {"BACKEND": PATH, "QUEUES": ["default"] if queues is None else queues}
    if options is not None:
        params["OPTIONS"] = options
    return JobRetryBackend("default", params)


def ids(found: list[Any]) -> list[str]:
    return [message.id for message in found]


class TestChecks:
    @pytest.mark.parametrize(
        "options",
        [
            None,
            {},
            {"policy": "three"},
            {"policy": "default", "task_policies": {}},
            {"task_policies": {"tests.jobs_app.tasks.flaky": "emails", "x.y": "demo"}},
        ],
    )
    def test_a_good_configuration_has_no_problem(self, options: Any) -> None:
        assert backend(options, queues=["default", "other", "a.b-c_9"]).check() == []

    def test_the_test_settings_pass_django_check(self) -> None:
        assert task_backends["default"].check() == []
        found = [m for m in run_checks() if m.id.startswith("django_jobretry.") and not m.is_silenced()]
        assert found == []

    @pytest.mark.parametrize(
        ("options", "expected"),
        [
            pytest.param(["policy", "three"], ["E021"], id="options-a-list"),
            pytest.param("three", ["E021"], id="options-a-string"),
            pytest.param({"polcy": "three"}, ["E021"], id="unknown-key"),
            pytest.param({"policy": "nope"}, ["E022"], id="unknown-policy"),
            pytest.param({"policy": 3}, ["E022"], id="policy-not-a-name"),
            pytest.param({"task_policies": {"a.b": "nope", "c.d": "three"}}, ["E022"], id="unknown-mapped"),
            pytest.param({"policy": "x", "task_policies": {"a.b": None}}, ["E022", "E022"], id="two-unknown"),
            pytest.param({"task_policies": ["a.b"]}, ["E023"], id="mapping-a-list"),
            pytest.param({"task_policies": "three"}, ["E023"], id="mapping-a-string"),
            pytest.param({"extra": 1, "task_policies": 2}, ["E021", "E023"], id="unknown-key-and-mapping"),
        ],
    )
    def test_each_bad_option_has_its_id(self, options: Any, expected: list[str]) -> None:
        found = backend(options).check()
        assert ids(found) == [f"django_jobretry.{code}" for code in expected]
        assert all('TASKS["default"]' in message.msg and message.hint is not None for message in found)

    def test_an_unknown_policy_close_to_a_known_one_is_suggested(self) -> None:
        [found] = backend({"policy": "threee"}).check()
        assert "'threee' is not a policy in JOBRETRY['POLICIES']. Did you mean 'three'?" in found.msg

    @pytest.mark.parametrize("queue", ["bad queue", "", "-leading-dash", "x" * 101, 7])
    def test_an_invalid_queue_name_is_e024(self, queue: Any) -> None:
        found = backend({}, queues=["default", queue]).check()
        assert ids(found) == ["django_jobretry.E024"]
        assert "queue_name" in found[0].msg

    def test_the_app_not_installed_is_e020(self) -> None:
        with override_settings(INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth"]):
            found = backend({"policy": "three"}).check()
        assert ids(found) == ["django_jobretry.E020"]
        assert "INSTALLED_APPS" in found[0].hint

    @pytest.mark.django_db
    @pytest.mark.parametrize("mapping", [["tests.jobs_app.tasks.flaky"], "tests.jobs_app.tasks.flaky"])
    def test_a_mapping_that_is_not_a_dict_is_reported_not_crashed_on(self, mapping: Any) -> None:
        """Tasks are validated when tasks.py is imported, before any check runs: that must not crash."""
        setting = {"default": {"BACKEND": PATH, "OPTIONS": {"policy": "demo", "task_policies": mapping}}}
        with override_settings(TASKS=setting):
            assert ids(task_backends["default"].check()) == ["django_jobretry.E023"]
            tasks.flaky.enqueue("k", 0)
        assert Job.objects.get().policy_name == "demo", "the OPTIONS policy, the mapping being unusable"

    def test_manage_py_check_reports_them(self) -> None:
        bad = {"default": {"BACKEND": PATH, "QUEUES": ["default", "no spaces"], "OPTIONS": {"policy": "x"}}}
        with override_settings(TASKS=bad), pytest.raises(SystemCheckError) as info:
            call_command("check")
        assert "django_jobretry.E022" in str(info.value)
        assert "django_jobretry.E024" in str(info.value)


def registered_here(key: str) -> str:
    """A module-level function for a @task made inside a test."""
    return key


class TestNoDatabaseAtLoad:
    @pytest.mark.django_db
    def test_constructing_checking_and_decorating_run_no_query(self) -> None:
        with CaptureQueriesContext(connection) as captured:
            made = backend({"policy": "three", "task_policies": {"a.b": "demo"}}, queues=["default"])
            assert made.check() == []
            with override_settings(TASKS={"default": {"BACKEND": PATH}}):
                assert isinstance(task_backends["default"], JobRetryBackend)
                defined = task(retry_policy("demo")(registered_here))
        assert captured.captured_queries == []
        assert registry.get(defined.module_path) is not None

    def test_importing_the_module_and_loading_tasks_open_no_connection(self) -> None:
        """A fresh interpreter: Django's setup imports the backend and tests/jobs_app/tasks.py."""
        script = textwrap.dedent(
            """
            from django.db.backends.signals import connection_created
            opened = []
            def record(sender, connection, **kwargs):
                opened.append(connection.alias)
            connection_created.connect(record, weak=False)  # a weak receiver would be gone at once
            import django_jobretry.backends
            import django
            django.setup()
            from django.tasks import task_backends
            from tests.jobs_app import tasks
            backend = task_backends["default"]
            assert backend.check() == [], backend.check()
            assert tasks.flaky.get_backend() is backend
            print("connections opened:", opened)
            """
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "connections opened: []"


def test_retry_policy_takes_a_policy_name() -> None:
    with pytest.raises(InvalidJob, match="retry_policy"):
        retry_policy(3)  # type: ignore[arg-type]


def test_e021_suggests_the_option_key() -> None:
    backend = JobRetryBackend("default", {"BACKEND": "x", "OPTIONS": {"polcy": "three"}})
    [error] = backend.check()
    assert error.id == "django_jobretry.E021"
    assert "unknown key(s) ['polcy']. Did you mean 'policy'?" in error.msg
    assert '"policy" (the JOBRETRY policy name of every task of this backend)' in (error.hint or "")
    assert "docs/" not in (error.hint or "")
