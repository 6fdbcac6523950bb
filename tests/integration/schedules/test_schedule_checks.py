"""`manage.py check` reports each schedule that cannot run (E040-E043), naming it and its source.

The source is where it was declared: @job, JOBRETRY["SCHEDULES"] or a task backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import django
import pytest
from django.conf import settings
from django.core.checks import Error, run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from django_jobretry import job
from django_jobretry.exceptions import InvalidJob, UnknownPolicy
from django_jobretry.registry import registry
from django_jobretry.schedules import declare, declared, job_schedule, run_columns
from django_jobretry.schedules.checks import run_problem
from tests.declarations import forgotten_afterwards

RECORD = "tests.jobs_app.jobs.record"
HOURLY = {"task": RECORD, "cron": "0 * * * *", "args": ["tick"]}
SETTINGS = 'JOBRETRY["SCHEDULES"]'


def declare_job_schedule(task_name: str, **declared_as: Any) -> None:
    """What ``@job(schedule=...)`` does with its keywords: build the schedule, then declare it."""
    declare(job_schedule(task_name, **declared_as))


@pytest.fixture(autouse=True)
def _forget_test_declarations() -> Iterator[None]:
    with forgotten_afterwards():
        yield


def schedule_errors(schedules: Any) -> list[Error]:
    """The E04x errors of every check, with these settings schedules (and the test settings' policies)."""
    with override_settings(JOBRETRY={**settings.JOBRETRY, "SCHEDULES": schedules}):
        return [
            e for e in run_checks() if isinstance(e, Error) and str(e.id).startswith("django_jobretry.E04")
        ]


def only_error(schedules: Any) -> Error:
    found = schedule_errors(schedules)
    assert len(found) == 1, found
    return found[0]


def test_good_schedules_pass() -> None:
    every = {"task": "tests.jobs_app.jobs.takes_anything", "every": 60, "args": [1], "kwargs": {"a": [2]}}
    assert schedule_errors({"hourly": HOURLY, "minutely": every, "queued": {**HOURLY, "queue": "q"}}) == []


def test_e040_schedules_is_not_a_dict() -> None:
    error = only_error([HOURLY])
    assert error.id == "django_jobretry.E040"
    assert error.msg == f"{SETTINGS} must be a dict of schedule name -> dict, got list."
    assert '"cron": "0 3 * * *"' in (error.hint or "")


def test_e040_reports_every_bad_schedule_with_its_name_not_only_the_first() -> None:
    found = schedule_errors(
        {
            "nightly": {**HOURLY, "cron": "61 * * * *"},
            "fine": HOURLY,
            "typo": {**HOURLY, "cronn": "0 3 * * *", "cron": None},
            "zone": {**HOURLY, "tz": "Europe/Berlln"},
        }
    )
    assert [e.id for e in found] == ["django_jobretry.E040"] * 3
    messages = [e.msg for e in found]
    assert messages[0].startswith(f"{SETTINGS}: schedule 'nightly': cron='61 * * * *' is invalid: a cron")
    assert messages[1].startswith(f"{SETTINGS}: schedule 'typo': cronn='0 3 * * *' is invalid: not a key.")
    assert "Did you mean 'cron'?" in messages[1]
    assert messages[2].startswith(f"{SETTINGS}: schedule 'zone': tz='Europe/Berlln' is invalid: an IANA")


def test_manage_py_check_fails_on_a_typo_in_a_cron_expression_naming_the_schedule() -> None:
    with (
        override_settings(
            JOBRETRY={**settings.JOBRETRY, "SCHEDULES": {"nightly": {**HOURLY, "cron": "0 3 * *"}}}
        ),
        pytest.raises(SystemCheckError, match=r"django_jobretry\.E040.*schedule 'nightly': cron='0 3 \* \*'"),
    ):
        call_command("check")


def test_e041_a_name_declared_twice_in_code_with_different_values() -> None:
    declare_job_schedule("tests.checks.twice", cron=None, every=60, tz=None)
    declare_job_schedule("tests.checks.twice", cron=None, every=120, tz=None)
    errors = [e for e in schedule_errors({}) if e.id == "django_jobretry.E041"]
    assert [e.msg for e in errors] == [
        "@job: schedule 'tests.checks.twice': declared 2 times with different values; "
        "only the last one imported runs."
    ]


def test_e041_a_settings_schedule_with_the_name_of_a_job_schedule() -> None:
    @job(name="tests.checks.tick", every=60)
    def tick() -> None: ...

    error = only_error({"tests.checks.tick": HOURLY})
    assert error.id == "django_jobretry.E041"
    assert error.msg == (
        f"{SETTINGS}: schedule 'tests.checks.tick': has the name of the schedule declared in @job, "
        "which it replaces."
    )


@pytest.mark.skipif(django.VERSION < (6, 0), reason="task backends come with django.tasks, Django 6.0")
def test_e041_a_settings_schedule_with_the_name_of_a_task_backend_schedule() -> None:
    backend = {**settings.TASKS["default"], "OPTIONS": {"policy": "three", "schedules": {"hourly": HOURLY}}}
    with override_settings(TASKS={"default": backend}):
        error = only_error({"hourly": {"task": RECORD, "every": 60, "args": ["tock"]}})
    assert error.id == "django_jobretry.E041"
    assert error.msg == (
        f"{SETTINGS}: schedule 'hourly': has the name of the schedule declared in "
        'TASKS["default"]["OPTIONS"]["schedules"], which it replaces.'
    )


def test_e042_a_typo_in_the_task_name_is_named_with_a_suggestion() -> None:
    error = only_error({"hourly": {**HOURLY, "task": "tests.jobs_app.jobs.recrod"}})
    assert error.id == "django_jobretry.E042"
    assert error.msg == (
        f"{SETTINGS}: schedule 'hourly': its task 'tests.jobs_app.jobs.recrod' is not registered in this "
        f"process, so no run of it can start. Did you mean {RECORD!r}?"
    )
    assert 'JOBRETRY["TASK_MODULES"]' in (error.hint or "")


def test_manage_py_check_fails_on_a_typo_in_a_task_name_naming_the_schedule() -> None:
    schedules = {"nightly": {**HOURLY, "task": "tests.jobs_app.jobs.recrod"}}
    with (
        override_settings(JOBRETRY={**settings.JOBRETRY, "SCHEDULES": schedules}),
        pytest.raises(SystemCheckError, match=r"django_jobretry\.E042.*schedule 'nightly': its task"),
    ):
        call_command("check")


#: Schedules whose task is registered but that cannot make a run, and what E043 says of each.
CANNOT_RUN: dict[str, tuple[dict[str, Any], str]] = {
    "no-arguments": ({**HOURLY, "args": []}, "record() cannot take these arguments: missing a required"),
    "extra-keyword": ({**HOURLY, "kwargs": {"colour": "red"}}, "got an unexpected keyword argument 'colour'"),
    "not-json": ({**HOURLY, "args": [{1, 2}]}, "positional argument 0"),
    "nan": ({**HOURLY, "args": [float("nan")]}, "JSON has no NaN or infinity"),
}


CANNOT_RUN_SETTINGS = {case: mapping for case, (mapping, _) in CANNOT_RUN.items()}


@pytest.mark.parametrize("case", sorted(CANNOT_RUN))
def test_e043_a_schedule_that_cannot_make_a_run(case: str) -> None:
    mapping, fragment = CANNOT_RUN[case]
    error = only_error({case: mapping})
    assert error.id == "django_jobretry.E043"
    assert error.msg.startswith(f"{SETTINGS}: schedule {case!r}: no run of it can start: ")
    assert fragment in error.msg


def test_e043_a_task_whose_policy_jobretry_does_not_define() -> None:
    @job(name="tests.checks.lost_policy", policy="threee")
    def lost_policy() -> None: ...

    found = schedule_errors({"lost": {"task": "tests.checks.lost_policy", "every": 60}})
    [error] = [e for e in found if e.id == "django_jobretry.E043"]
    assert error.msg.startswith(f"{SETTINGS}: schedule 'lost': no run of it can start: unknown retry policy")
    assert "Did you mean 'three'?" in error.msg


def test_e043_a_queue_name_enqueue_would_refuse() -> None:
    error = only_error({"hourly": {**HOURLY, "queue": "q" * 101}})
    assert error.id == "django_jobretry.E043"
    assert "queue_name 'qqq" in error.msg
    assert "use 1-100 characters" in error.msg


def run_answers(mapping: dict[str, Any]) -> tuple[str | None, str | None]:
    """(what run_columns raises, what E043's run_problem says) for one settings schedule; None: fine."""
    with override_settings(JOBRETRY={**settings.JOBRETRY, "SCHEDULES": {"s": mapping}}):
        spec = declared()["s"]
        definition = registry.get(spec.task_name)
        assert definition is not None
        try:
            run_columns(spec)
        except (InvalidJob, UnknownPolicy) as exc:
            raised: str | None = str(exc)
        else:
            raised = None
        return raised, run_problem(spec)


@pytest.mark.parametrize("case", [*sorted(CANNOT_RUN), "fine"])
def test_e043_says_what_the_workers_run_columns_raises(case: str) -> None:
    """E043 says what the workers' run_columns raises: both give one answer."""
    mapping = CANNOT_RUN[case][0] if case in CANNOT_RUN else HOURLY
    raised, said = run_answers(mapping)
    assert said == raised
    assert (said is None) == (case == "fine")


def test_e043_and_run_columns_agree_on_an_unknown_policy() -> None:
    @job(name="tests.checks.lost_policy", policy="threee")
    def lost_policy() -> None: ...

    raised, said = run_answers({"task": "tests.checks.lost_policy", "every": 60})
    assert said == raised
    assert (said or "").startswith("unknown retry policy 'threee'")


def test_no_hint_points_at_the_repository_docs() -> None:
    """A pip install has no docs/: each hint says what to do itself (as test_check_wording.py asks)."""
    declare_job_schedule("tests.checks.twice", cron=None, every=60, tz=None)
    declare_job_schedule("tests.checks.twice", cron=None, every=120, tz=None)
    found = schedule_errors(
        {"bad": {**HOURLY, "cron": "61 * * * *"}, "lost": {**HOURLY, "task": "x"}, **CANNOT_RUN_SETTINGS}
    )
    assert {str(e.id) for e in found} == {f"django_jobretry.E04{n}" for n in range(4)}
    assert [e.hint for e in found if "docs/" in (e.hint or "") or ".md" in (e.hint or "")] == []
