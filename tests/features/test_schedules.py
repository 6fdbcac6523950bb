"""Step definitions for schedules.feature: schedules declared in settings, looked at by the service."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.checks import run_checks
from django.db.models.functions import Now
from django.test import override_settings
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry.models import DeadLetter, DeadReason, Job, Schedule
from django_jobretry.schedules import declared
from django_jobretry.schedules.rows import declare_rows
from django_jobretry.schedules.runs import run_due
from tests.inprocess import run_until_settled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("keep_signal_handlers")]

scenarios("schedules.feature")

NAME = "rare"
#: The longest interval: the newest missed slot is rarely within the on-time grace (a minute) of now.
EVERY = 366 * 86400
LIMIT = 5


@pytest.fixture
def declaration() -> dict[str, Any]:
    return {}


@pytest.fixture(autouse=True)
def declared_in_settings(declaration: dict[str, Any]) -> Iterator[None]:
    """The scenario's schedule, in JOBRETRY["SCHEDULES"] until it ends."""
    from django.conf import settings

    with override_settings(JOBRETRY={**settings.JOBRETRY, "SCHEDULES": declaration}):
        yield


def looked_back(slots: int) -> list[Any]:
    """The last ``slots`` slots of the schedule before its next one, oldest first, after moving it back."""
    spec = declared()[NAME]
    declare_rows({NAME: spec})
    row = Schedule.objects.get(name=NAME)
    step = spec.cadence.every
    assert step is not None
    missed = [row.next_slot - step * n for n in range(slots, 0, -1)]
    Schedule.objects.filter(name=NAME).update(next_slot=missed[0])
    return missed


@given(parsers.parse('a schedule every 366 days with catch_up "{catch_up}" and overlap "{overlap}"'))
def rare(declaration: dict[str, Any], catch_up: str, overlap: str) -> None:
    declaration[NAME] = {
        **{"task": "tests.jobs_app.jobs.record_run", "every": EVERY, "catch_up": catch_up},
        **{"catch_up_limit": LIMIT, "overlap": overlap},
    }


@given("a schedule every 366 days of a task that always fails")
def rare_failing(declaration: dict[str, Any]) -> None:
    declaration[NAME] = {"task": "tests.jobs_app.jobs.always_fails_retryably", "every": EVERY}


@given(parsers.parse("no worker looked at it for {slots:d} slots"), target_fixture="missed")
def downtime(slots: int) -> list[Any]:
    return looked_back(slots)


@given("a worker looked at its schedules")
@when("a worker looks at its schedules")
def look() -> None:
    run_due(declared())


@given("its run may retry for five seconds more")
def short_window() -> None:
    # Short, so the run dies soon; long enough that a loaded machine still retries it (every 0.2 s).
    Job.objects.filter(schedule_name=NAME).update(retry_until=Now() + timedelta(seconds=5))


@when("workers run every due job until none is live")
def run_all() -> None:
    run_until_settled(within=120, concurrency=1)


@then(parsers.parse("the schedule made {runs:d} runs, of the newest slots"))
def made(runs: int, missed: list[Any]) -> None:
    slots = sorted(
        s for s in Job.objects.filter(schedule_name=NAME).values_list("schedule_slot", flat=True) if s
    )
    assert len(slots) == runs
    assert slots == missed[len(missed) - runs :]
    assert Schedule.objects.get(name=NAME).runs >= runs


@then(parsers.parse("it counts {missed:d} missed slots"))
def counts_missed(missed: int) -> None:
    assert Schedule.objects.get(name=NAME).missed == missed


@then(parsers.parse("it counts {skipped:d} skipped slot"))
def counts_skipped(skipped: int) -> None:
    assert Schedule.objects.get(name=NAME).skipped == skipped


@then(parsers.parse('the run is a dead letter with reason "{reason}" that names its schedule and slot'))
def dead_run(reason: str) -> None:
    [letter] = DeadLetter.objects.filter(schedule_name=NAME)
    assert letter.reason == DeadReason(reason)
    assert letter.schedule_slot is not None
    assert not Job.objects.filter(schedule_name=NAME).exists()


@then("it was attempted more than once")
def attempted_more_than_once() -> None:
    assert DeadLetter.objects.get(schedule_name=NAME).attempts > 1


@given(parsers.parse('a schedule "{name}" with the cron expression "{cron}"'))
def typo(declaration: dict[str, Any], name: str, cron: str) -> None:
    declaration[name] = {"task": "tests.jobs_app.jobs.record_run", "cron": cron}


@when("manage.py check runs", target_fixture="messages")
def check() -> list[Any]:
    return [message for message in run_checks() if message.id == "django_jobretry.E040"]


@then(parsers.parse('it reports E040 naming "{name}" and the cron expression'))
def reports(messages: list[Any], name: str) -> None:
    [message] = messages
    assert f"schedule {name!r}" in message.msg
    assert "cron=" in message.msg
