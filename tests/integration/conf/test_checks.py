"""One test per system check id; `manage.py check` names the bad key and value."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.checks import Error, Warning
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.checks import check_heartbeat, check_job_policies, check_settings
from tests.jobs_app import jobs
from tests.manage_py import manage_py


def errors_for(jobretry: Any) -> list[Error]:
    with override_settings(JOBRETRY=jobretry):
        return [e for e in check_settings() if isinstance(e, Error)]


def only_error(jobretry: Any) -> Error:
    found = errors_for(jobretry)
    assert len(found) == 1, found
    return found[0]


def test_valid_settings_pass() -> None:
    assert errors_for({"POLICIES": {"default": {}, "emails": {"max_attempts": 5, "retry_for": 600}}}) == []


def test_missing_jobretry_setting_is_fine() -> None:
    with override_settings():
        from django.conf import settings

        del settings.JOBRETRY
        assert check_settings() == []


def test_e001_not_a_dict() -> None:
    error = only_error(["POLICIES"])
    assert error.id == "django_jobretry.E001"
    assert "must be a dict, got list" in error.msg


def test_e002_unknown_top_level_key() -> None:
    error = only_error({"POLICY": {}})
    assert error.id == "django_jobretry.E002"
    assert "'POLICY'" in error.msg
    assert "POLICIES" in (error.hint or "")


@pytest.mark.parametrize(
    ("jobretry", "fragment"),
    [
        ({"POLICIES": ["default"]}, "must be a dict of policy name"),
        ({"POLICIES": {"emails": 5}}, '["emails"] must be a dict, got int'),
        ({"POLICIES": {"Bad Name": {}}}, "'Bad Name' is not a valid policy name"),
    ],
)
def test_e003_malformed_policies(jobretry: Any, fragment: str) -> None:
    error = only_error(jobretry)
    assert error.id == "django_jobretry.E003"
    assert fragment in error.msg


def test_e004_unknown_policy_field() -> None:
    error = only_error({"POLICIES": {"emails": {"max_retries": 3}}})
    assert error.id == "django_jobretry.E004"
    assert '["emails"]' in error.msg
    assert "max_retries" in error.msg
    assert "max_attempts" in (error.hint or "")


def test_e005_invalid_value_names_policy_field_value_and_allowed() -> None:
    error = only_error({"POLICIES": {"emails": {"jitter": 1.5}}})
    assert error.id == "django_jobretry.E005"
    assert error.msg == (
        """JOBRETRY["POLICIES"]["emails"]["jitter"] = 1.5 is invalid: must be a fraction in [0, 1]."""
    )


def test_e005_budget_too_small() -> None:
    error = only_error({"POLICIES": {"default": {"total_budget": 60}}})
    assert error.id == "django_jobretry.E005"
    assert '["default"]["total_budget"] = 60' in error.msg
    assert "worst-case schedule" in error.msg


@pytest.mark.parametrize(
    ("paths", "fragment"),
    [
        (["no.such.module.Error"], "cannot import 'no.such.module.Error'"),
        (["django.conf.settings"], "is not an exception class"),
        ("builtins.ValueError", "must be a list of dotted paths"),
        (
            ["tests.integration.conf.broken_module.Error"],
            "(ZeroDivisionError: division by zero)",
        ),
    ],
)
def test_e006_bad_error_class_paths(paths: Any, fragment: str) -> None:
    error = only_error({"POLICIES": {"emails": {"fatal_errors": paths}}})
    assert error.id == "django_jobretry.E006"
    assert fragment in error.msg


def test_e006_class_listed_as_both_fatal_and_retryable() -> None:
    error = only_error(
        {
            "POLICIES": {
                "x": {"fatal_errors": ["builtins.KeyError"], "retryable_errors": ["builtins.KeyError"]}
            }
        }
    )
    assert error.id == "django_jobretry.E006"
    assert "['builtins.KeyError'] as both fatal_errors and retryable_errors" in error.msg


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("LEASE_SECONDS", 0, "expected a number from 1 to 86400"),
        ("LEASE_SECONDS", "60", "expected a number from 1 to 86400"),
        ("MAX_ARGS_BYTES", 1.5, "expected an integer from 64 to"),
        ("HEARTBEAT_SECONDS", -1, "expected a number from 0.1 to 3600 or None"),
        ("SUCCEEDED_RETENTION_DAYS", True, "expected a number from 0 to 36500"),
    ],
)
def test_e007_worker_and_limit_settings(key: str, value: Any, allowed: str) -> None:
    error = only_error({key: value})
    assert error.id == "django_jobretry.E007"
    assert error.msg.startswith(f'JOBRETRY["{key}"] = {value!r} is invalid: {allowed}')


def test_e007_accepts_none_where_optional() -> None:
    assert errors_for({"HEARTBEAT_SECONDS": None, "LEASE_SECONDS": 30}) == []


def test_every_problem_is_reported_not_only_the_first() -> None:
    found = errors_for({"EXTRA": 1, "POLICIES": {"a": {"jitter": 2}, "b": {"multiplier": 0}}})
    assert sorted(str(e.id) for e in found) == [
        "django_jobretry.E002",
        "django_jobretry.E005",
        "django_jobretry.E005",
    ]


def test_one_run_reports_every_field_of_a_policy_and_suggests_names() -> None:
    found = errors_for(
        {
            "POLICY": {},
            "POLICIES": {
                "emails": {"max_atempts": 3, "jitter": 2, "base_delay": -1, "retryable_errors": ["no.Such"]},
            },
        }
    )
    messages = sorted(f"{e.id} {e.msg}" for e in found)
    assert [m.split(" ")[0] for m in messages] == [
        "django_jobretry.E002",
        "django_jobretry.E004",
        "django_jobretry.E005",
        "django_jobretry.E005",
        "django_jobretry.E006",
    ]
    assert "Did you mean 'POLICIES'?" in messages[0]
    assert "['max_atempts']. Did you mean 'max_attempts'?" in messages[1]
    assert any('["base_delay"] = -1' in m for m in messages)
    assert any('["jitter"] = 2' in m for m in messages)


def test_limits_between_fields_are_checked_on_the_whole_policy() -> None:
    assert errors_for({"POLICIES": {"slow": {"base_delay": 10_000, "max_delay": 20_000}}}) == []
    error = only_error({"POLICIES": {"slow": {"base_delay": 100, "max_delay": 10}}})
    assert '["max_delay"] = 10 is invalid: must be >= base_delay (100 s)' in error.msg


def test_e009_a_registered_job_names_a_policy_that_does_not_exist() -> None:
    renamed = {**settings.JOBRETRY["POLICIES"], "threes": settings.JOBRETRY["POLICIES"]["three"]}
    del renamed["three"]
    with override_settings(JOBRETRY={**settings.JOBRETRY, "POLICIES": renamed}):
        found = check_job_policies()
        with pytest.raises(SystemCheckError, match=r"django_jobretry\.E009"):
            call_command("check")
    assert found
    assert {e.id for e in found} == {"django_jobretry.E009"}
    assert f"task {jobs.record.name!r} uses the policy 'three'" in " ".join(e.msg for e in found)
    assert all("Did you mean 'threes'?" in e.msg for e in found)
    assert check_job_policies() == []


def test_manage_py_check_fails_naming_the_bad_key() -> None:
    with (
        override_settings(JOBRETRY={"POLICIES": {"emails": {"max_attempts": 0}}}),
        pytest.raises(SystemCheckError, match=r'\["emails"\]\["max_attempts"\] = 0 is invalid'),
    ):
        call_command("check")


def test_check_ids_are_unique_and_documented() -> None:
    """Every error id of the core checks, from the modules that report them, is one of a known list.

    Some ids are shared on purpose by two modules: E012 (LISTEN's type in conf/schema.py,
    its alias in databases.py) and E014 (TASK_MODULES' type, and a module of it that does not import).
    """
    root = Path(__file__).parents[3]
    package = root / "django_jobretry"
    modules = (
        *(f"conf/{name}.py" for name in ("schema", "problems", "databases", "checks", "database_engine")),
        "conf/task_modules.py",
        "schedules/checks.py",
    )
    found = {
        found
        for module in modules
        for found in re.findall(
            r'(?:Problem\(\s*"|id="django_jobretry\.|_error\(\s*")(E\d{3})"', (package / module).read_text()
        )
    }
    assert sorted(found) == [*(f"E{n:03}" for n in range(1, 20)), "E025", "E040", "E041", "E042", "E043"]
    docs = (root / "docs" / "settings.md").read_text()
    assert [i for i in sorted(found) if f"django_jobretry.{i}" not in docs] == []


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (5, "must be a dotted path to a callable, got 5"),
        ("no.such.redact", "cannot import 'no.such.redact'"),
        ("django_jobretry.policy.decisions.MAX_ATTEMPTS_LIMIT", "is not callable"),
    ],
)
def test_e008_payload_redactor(value: Any, fragment: str) -> None:
    error = only_error({"PAYLOAD_REDACTOR": value})
    assert error.id == "django_jobretry.E008"
    assert fragment in error.msg


def test_e008_accepts_a_callable_path() -> None:
    assert errors_for({"PAYLOAD_REDACTOR": "builtins.print"}) == []


@pytest.mark.parametrize(
    ("value", "error_id", "fragment"),
    [
        ("tests.jobs_app.middleware.outer", "E017", "expected a list of dotted paths to callables"),
        ({"outer": 1}, "E017", "expected a list of dotted paths to callables"),
        ([5], "E017", "5 is not a string"),
        (["tests.jobs_app.middleware.no_such"], "E018", "cannot import 'tests.jobs_app.middleware.no_such'"),
        (["no.such.module.mw"], "E018", "cannot import 'no.such.module.mw'"),
        (["tests.jobs_app.middleware.NOT_CALLABLE"], "E019", "is a int, not a callable"),
    ],
)
def test_e017_to_e019_middleware(value: Any, error_id: str, fragment: str) -> None:
    error = only_error({"MIDDLEWARE": value})
    assert error.id == f"django_jobretry.{error_id}"
    assert fragment in error.msg
    assert 'JOBRETRY["MIDDLEWARE"]' in error.msg


def test_middleware_accepts_a_list_or_tuple_of_callable_paths() -> None:
    paths = ["tests.jobs_app.middleware.outer", "tests.jobs_app.middleware.inner"]
    assert errors_for({"MIDDLEWARE": paths}) == []
    assert errors_for({"MIDDLEWARE": tuple(paths)}) == []
    assert errors_for({"MIDDLEWARE": []}) == []


def test_every_bad_middleware_entry_is_reported_at_once() -> None:
    found = errors_for({"MIDDLEWARE": [1, "no.such.mw", "tests.jobs_app.middleware.NOT_CALLABLE"]})
    assert [e.id for e in found] == [f"django_jobretry.E0{n}" for n in (17, 18, 19)]


def test_w001_heartbeat_longer_than_a_third_of_the_lease() -> None:
    with override_settings(JOBRETRY={"LEASE_SECONDS": 30, "HEARTBEAT_SECONDS": 15}):
        [warning] = check_heartbeat()
    assert warning.id == "django_jobretry.W001"
    assert "workers beat every 10 s instead" in warning.msg
    assert isinstance(warning, Warning)


@pytest.mark.parametrize(
    "jobretry", [{"LEASE_SECONDS": 30, "HEARTBEAT_SECONDS": 10}, {}, {"LEASE_SECONDS": 0}]
)
def test_w001_silent_when_fine_or_already_an_error(jobretry: Any) -> None:
    with override_settings(JOBRETRY=jobretry):
        assert check_heartbeat() == []


def test_manage_py_check_runs_in_a_project_without_a_url_configuration() -> None:
    """A worker-only settings module has no ROOT_URLCONF: the metrics check must not resolve URLs.

    prometheus_client is hidden, as when it is not installed: only then does the check look at URLs.
    """
    result = manage_py(
        "check",
        env={"DJANGO_SETTINGS_MODULE": "tests.settings_worker_only"},
        prelude="import sys; sys.modules['prometheus_client'] = None",
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert "System check identified no issues" in result.stdout


@pytest.mark.parametrize(
    ("circuit", "message"),
    [
        ({"failures": 0}, '["emails"]["circuit"]["failures"] = 0 is invalid: an integer from 1 to 1000000.'),
        ({"window": 60}, '["emails"]["circuit"] = {\'window\': 60} is invalid: needs "failures"'),
        (
            {"failures": 5, "windo": 60},
            "['windo'] is invalid: unknown key(s); allowed: ['cooldown', 'errors',",
        ),
        ({"failures": 5, "cooldown": 100, "max_cooldown": 10}, "must be >= cooldown (100 s)"),
        ({"failures": 5, "release_per_second": 0}, '["release_per_second"] = 0 is invalid'),
        ("on", "[\"circuit\"] = 'on' is invalid: a dict such as"),
    ],
)
def test_e005_a_bad_circuit_names_its_key(circuit: Any, message: str) -> None:
    error = only_error({"POLICIES": {"emails": {"circuit": circuit}}})
    assert error.id == "django_jobretry.E005"
    assert message in error.msg


def test_e006_a_circuit_error_class_must_import() -> None:
    error = only_error({"POLICIES": {"emails": {"circuit": {"failures": 5, "errors": ["no.such.Error"]}}}})
    assert error.id == "django_jobretry.E006"
    assert '["emails"]["circuit"]["errors"]: cannot import \'no.such.Error\'' in error.msg


def test_a_circuit_and_a_snooze_budget_are_read_from_settings() -> None:
    with override_settings(
        JOBRETRY={
            "POLICIES": {
                "emails": {
                    "max_snoozes": 3,
                    "circuit": {"failures": 5, "errors": ["builtins.ConnectionError"], "cooldown": 10},
                }
            }
        }
    ):
        assert check_settings() == []
        policy = jobretry_settings.policies["emails"]
    assert policy.max_snoozes == 3
    assert policy.circuit is not None
    assert (policy.circuit.failures, policy.circuit.errors) == (5, (ConnectionError,))


def test_e005_max_snoozes_out_of_range() -> None:
    error = only_error({"POLICIES": {"emails": {"max_snoozes": -1}}})
    assert error.msg.endswith('["max_snoozes"] = -1 is invalid: an integer from 0 to 100000.')


def test_a_snooze_time_budget_is_read_from_settings_and_a_bad_one_is_e005() -> None:
    with override_settings(JOBRETRY={"POLICIES": {"partner": {"snooze_for": 21600}}}):
        assert check_settings() == []
        policy = jobretry_settings.policies["partner"]
    assert (policy.snooze_for, policy.max_snoozes) == (timedelta(hours=6), 100_000)
    error = only_error({"POLICIES": {"partner": {"snooze_for": 0}}})
    assert error.msg.endswith('["snooze_for"] = 0 is invalid: must be > 0 seconds.')
