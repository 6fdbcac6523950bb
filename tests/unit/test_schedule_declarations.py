"""Declaring schedules (schedules/__init__.py): a mistake names the schedule, field, value and fix.

A schedule is declared in JOBRETRY["SCHEDULES"] (:func:`from_mapping`) or
on ``@job`` (:func:`declare_job_schedule`); both validate with
:func:`cadence_of` and :func:`options`. A bad declaration raises
InvalidSchedule when it is read, so ``@job`` fails the import that
declares it and ``manage.py check`` (E040) reports a settings one.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from django_jobretry import job
from django_jobretry.policy.slots import DEFAULT_CATCH_UP_LIMIT, Cadence, CatchUp, Overlap
from django_jobretry.schedules import (
    KEYS,
    InvalidSchedule,
    ScheduleSpec,
    cadence_of,
    conflicts,
    declare,
    declared,
    from_mapping,
    job_schedule,
    options,
)
from tests.declarations import forgotten_afterwards

SOURCE = 'JOBRETRY["SCHEDULES"]'
NIGHTLY = {"task": "reports.jobs.build", "cron": "0 3 * * *"}


def declare_job_schedule(task_name: str, **declared_as: Any) -> None:
    """What ``@job(schedule=...)`` does with its keywords: build the schedule, then declare it."""
    declare(job_schedule(task_name, **declared_as))


@pytest.fixture(autouse=True)
def _forget_test_declarations() -> Iterator[None]:
    with forgotten_afterwards():
        yield


def refused(name: object, mapping: object) -> InvalidSchedule:
    with pytest.raises(InvalidSchedule) as raised:
        from_mapping(name, mapping, SOURCE)
    return raised.value


@pytest.mark.parametrize(
    ("changes", "field", "value", "allowed"),
    [
        ({"task": None}, "task", None, "the registered name of a task, e.g. 'reports.jobs.build'"),
        ({"task": ""}, "task", "", "the registered name of a task"),
        ({"task": 5}, "task", 5, "the registered name of a task"),
        ({"cron": None}, "cron", None, "give exactly one of cron (with tz) and every"),
        ({"every": 60}, "cron", "0 3 * * *", "give exactly one of cron (with tz) and every"),
        ({"cron": 5}, "cron", 5, "a cron expression as a string, e.g. '0 3 * * *'"),
        ({"cron": "61 * * * *"}, "cron", "61 * * * *", "a cron expression: minute hour day month weekday"),
        ({"cron": "0 3 * *"}, "cron", "0 3 * *", "a cron expression: minute hour day month weekday"),
        ({"tz": "Europe/Berlln"}, "tz", "Europe/Berlln", "an IANA time zone name, e.g. 'Europe/Berlin'"),
        ({"cron": None, "every": 60, "tz": "UTC"}, "tz", "UTC", "only for cron: an interval is the same"),
        ({"cron": None, "every": 0}, "every", timedelta(0), "a timedelta from 0:00:01 to 366 days"),
        ({"cron": None, "every": 1.5}, "every", timedelta(seconds=1.5), "whole seconds"),
        ({"cron": None, "every": True}, "every", True, "a timedelta from 0:00:01"),
        ({"cron": None, "every": "60"}, "every", "60", "a timedelta from 0:00:01"),
        ({"args": "tick"}, "args", "tick", "a list"),
        ({"args": {"a": 1}}, "args", {"a": 1}, "a list"),
        ({"kwargs": [1]}, "kwargs", [1], "a dict with string keys"),
        ({"kwargs": {1: "a"}}, "kwargs", {1: "a"}, "a dict with string keys"),
        ({"queue": 5}, "queue", 5, "a queue name, or None for the task's own"),
        ({"overlap": "never"}, "overlap", "never", "one of 'skip', 'queue', 'allow'"),
        ({"catch_up": "some"}, "catch_up", "some", "one of 'latest', 'all', 'none'"),
        ({"catch_up_limit": 0}, "catch_up_limit", 0, "an integer from 1 to 1000"),
        ({"catch_up_limit": 1001}, "catch_up_limit", 1001, "an integer from 1 to 1000"),
        ({"catch_up_limit": True}, "catch_up_limit", True, "an integer from 1 to 1000"),
        ({"catch_up_limit": "5"}, "catch_up_limit", "5", "an integer from 1 to 1000"),
        ({"retry_until_next_slot": "yes"}, "retry_until_next_slot", "yes", "True or False"),
    ],
)
def test_a_bad_value_names_the_schedule_the_field_the_value_and_what_is_allowed(
    changes: dict[str, Any], field: str, value: object, allowed: str
) -> None:
    mapping = {key: given for key, given in {**NIGHTLY, **changes}.items() if given is not None}
    error = refused("nightly", mapping)
    assert (error.schedule, error.field, error.value) == ("nightly", field, value)
    assert str(error).startswith(f"schedule 'nightly': {field}={value!r} is invalid: {allowed}"), str(error)


@pytest.mark.parametrize(("key", "meant"), [("cronn", "cron"), ("kwarg", "kwargs"), ("catchup", "catch_up")])
def test_an_unknown_key_is_named_with_a_suggestion_and_the_keys(key: str, meant: str) -> None:
    error = refused("nightly", {**NIGHTLY, key: "x"})
    assert (error.schedule, error.field, error.value) == ("nightly", key, "x")
    assert f"{key}='x' is invalid: not a key. Did you mean {meant!r}?" in str(error)
    assert str(error).endswith(f"Keys: {', '.join(KEYS)}")


@pytest.mark.parametrize(
    ("name", "mapping", "field"),
    [
        (5, NIGHTLY, "name"),
        ("", NIGHTLY, "name"),
        ("n" * 201, NIGHTLY, "name"),
        ("nightly", ["reports.jobs.build", "0 3 * * *"], "schedule"),
        ("nightly", "0 3 * * *", "schedule"),
    ],
)
def test_a_bad_name_or_a_schedule_that_is_not_a_dict(name: object, mapping: object, field: str) -> None:
    error = refused(name, mapping)
    assert error.field == field
    assert str(error).startswith(f"schedule {str(name)!r}: {field}=")


def test_a_full_mapping_gives_its_spec() -> None:
    spec = from_mapping(
        "nightly",
        {
            **NIGHTLY,
            "tz": "Europe/Berlin",
            "args": ["eu"],
            "kwargs": {"full": True},
            "queue": "reports",
            "overlap": "queue",
            "catch_up": "all",
            "catch_up_limit": 5,
            "retry_until_next_slot": False,
        },
        SOURCE,
    )
    assert spec == ScheduleSpec(
        name="nightly",
        task_name="reports.jobs.build",
        cadence=Cadence(cron="0 3 * * *", tz="Europe/Berlin"),
        args=("eu",),
        kwargs={"full": True},
        queue_name="reports",
        overlap=Overlap.QUEUE,
        catch_up=CatchUp.ALL,
        catch_up_limit=5,
        retry_until_next_slot=False,
        source=SOURCE,
    )


def test_the_defaults_of_a_minimal_mapping() -> None:
    spec = from_mapping("nightly", NIGHTLY, SOURCE)
    assert spec.cadence == Cadence(cron="0 3 * * *", tz="UTC")
    assert (spec.args, spec.kwargs, spec.queue_name) == ((), {}, None)
    assert (spec.overlap, spec.catch_up, spec.catch_up_limit) == (
        Overlap.SKIP,
        CatchUp.LATEST,
        DEFAULT_CATCH_UP_LIMIT,
    )
    assert spec.retry_until_next_slot is True


@pytest.mark.parametrize("every", [300, 300.0, timedelta(minutes=5)])
def test_an_interval_in_seconds_or_as_a_timedelta(every: object) -> None:
    assert cadence_of("s", every=every) == Cadence(every=timedelta(minutes=5))
    assert from_mapping("s", {"task": "t", "every": every}, SOURCE).cadence == Cadence(
        every=timedelta(minutes=5)
    )


def test_options_default_and_validate_each_key() -> None:
    assert options("s", {}) == {"catch_up_limit": DEFAULT_CATCH_UP_LIMIT, "retry_until_next_slot": True}
    assert options("s", {"overlap": "allow", "catch_up": "none"}) == {
        "overlap": Overlap.ALLOW,
        "catch_up": CatchUp.NONE,
        "catch_up_limit": DEFAULT_CATCH_UP_LIMIT,
        "retry_until_next_slot": True,
    }


def test_declare_job_schedule_names_the_schedule_after_the_task() -> None:
    declare_job_schedule(
        "tests.decl.every_minute", cron="* * * * *", every=None, tz="Europe/Berlin", overlap="allow"
    )
    spec = declared()["tests.decl.every_minute"]
    assert spec == ScheduleSpec(
        name="tests.decl.every_minute",
        task_name="tests.decl.every_minute",
        cadence=Cadence(cron="* * * * *", tz="Europe/Berlin"),
        overlap=Overlap.ALLOW,
        source="@job",
    )


def test_declare_job_schedule_refuses_a_bad_option() -> None:
    with pytest.raises(
        InvalidSchedule, match=r"schedule 'tests\.decl\.bad': catch_up='sometimes' is invalid"
    ):
        declare_job_schedule("tests.decl.bad", cron=None, every=60, tz=None, catch_up="sometimes")
    assert "tests.decl.bad" not in declared()


def test_declaring_a_name_again_differently_is_a_conflict_and_the_same_again_is_not() -> None:
    declare_job_schedule("tests.decl.twice", cron=None, every=60, tz=None)
    declare_job_schedule("tests.decl.twice", cron=None, every=60, tz=None)  # a module imported again
    assert "tests.decl.twice" not in conflicts
    declare_job_schedule("tests.decl.twice", cron=None, every=120, tz=None)
    assert conflicts["tests.decl.twice"] == ["@job", "@job"]


# -- @job ----------------------------------------------------------------------------------


def test_job_with_a_schedule_declares_it() -> None:
    @job(name="tests.decl.hourly", every=3600, catch_up="none")
    def hourly() -> None: ...

    spec = declared()["tests.decl.hourly"]
    assert (spec.task_name, spec.cadence, spec.catch_up) == (
        "tests.decl.hourly",
        Cadence(every=timedelta(hours=1)),
        CatchUp.NONE,
    )


def test_job_with_a_bad_cron_expression_raises_at_decoration() -> None:
    with pytest.raises(InvalidSchedule) as raised:

        @job(name="tests.decl.bad_cron", schedule="61 * * * *")
        def bad_cron() -> None: ...

    assert (raised.value.schedule, raised.value.field, raised.value.value) == (
        "tests.decl.bad_cron",
        "cron",
        "61 * * * *",
    )
    assert "a cron expression: minute hour day month weekday" in str(raised.value)
    assert "tests.decl.bad_cron" not in declared()


def test_job_with_a_schedule_on_a_function_that_needs_arguments_raises() -> None:
    with pytest.raises(InvalidSchedule) as raised:

        @job(name="tests.decl.needs_arguments", every=60)
        def needs_arguments(order_id: int) -> None: ...

    assert (raised.value.schedule, raised.value.field) == ("tests.decl.needs_arguments", "schedule")
    assert "a call with no arguments" in str(raised.value)
    assert "missing a required argument: 'order_id'" in str(raised.value)
    assert "tests.decl.needs_arguments" not in declared()


def test_job_with_an_unknown_keyword_lists_the_schedule_options() -> None:
    with pytest.raises(TypeError) as raised:
        job(name="tests.decl.typo", every=60, catchup="none")  # type: ignore[call-overload]
    assert str(raised.value) == (
        "job() got an unexpected keyword argument 'catchup'; "
        "its schedule options are overlap, catch_up, catch_up_limit, retry_until_next_slot"
    )


def test_a_job_whose_schedule_is_refused_is_not_registered_either() -> None:
    from django_jobretry.registry import registry

    with pytest.raises(InvalidSchedule):

        @job(name="tests.decl.refused", schedule="61 * * * *")
        def refused() -> None: ...

    assert registry.get("tests.decl.refused") is None


def test_a_misspelt_time_zone_gets_a_did_you_mean() -> None:
    with pytest.raises(InvalidSchedule) as raised:
        from_mapping("nightly", {**NIGHTLY, "tz": "Europe/Berln"}, SOURCE)
    assert str(raised.value).endswith("Did you mean 'Europe/Berlin'?")
