"""Schedules of django.tasks tasks: declared in the backend's ``OPTIONS["schedules"]``, run as results."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.checks import run_checks
from django.db.models.functions import Now
from django.test import override_settings

from django_jobretry.models import Job, JobStatus, Schedule
from django_jobretry.schedules import declared
from django_jobretry.schedules.rows import declare_rows
from django_jobretry.schedules.runs import run_due
from tests.inprocess import run_until_settled
from tests.jobs_app import tasks
from tests.jobs_app.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("keep_signal_handlers")]

FLAKY = tasks.flaky.module_path


def backend(schedules: object) -> dict[str, object]:
    options = {"policy": "three", "schedules": schedules}
    return {
        "default": {
            "BACKEND": "django_jobretry.backends.JobRetryBackend",
            "QUEUES": ["default", "other"],
            "OPTIONS": options,
        }
    }


def test_a_backend_schedule_runs_its_task_as_a_task_result() -> None:
    mapping = {"hourly-flaky": {"task": FLAKY, "every": 3600, "args": ["scheduled", 1], "overlap": "allow"}}
    with override_settings(TASKS=backend(mapping)):
        specs = declared()
        assert specs["hourly-flaky"].source == 'TASKS["default"]["OPTIONS"]["schedules"]'
        declare_rows(specs)
        row = Schedule.objects.get(name="hourly-flaky")
        Schedule.objects.filter(pk=row.pk).update(
            next_slot=row.next_slot.replace(year=row.next_slot.year - 1)
        )
        run_due(specs)
        run = Job.objects.get(schedule_name="hourly-flaky")
        # A run may retry until its schedule's next slot, the next full hour: not a minute, when the
        # test runs at 05:59. The retry is what this test is about, not that deadline.
        Job.objects.filter(pk=run.pk).update(retry_until=Now() + timedelta(hours=1))
        run_until_settled(concurrency=1)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED
    assert run.return_value == {"key": "scheduled", "runs": 2}, "the task's policy retried it once"
    assert Execution.objects.filter(key="scheduled").count() == 2
    assert tasks.flaky.get_result(str(run.pk)).return_value == {"key": "scheduled", "runs": 2}


def test_a_bad_backend_schedule_fails_check_naming_it() -> None:
    with override_settings(TASKS=backend({"nightly": {"task": FLAKY, "cron": "0 25 * * *"}})):
        errors = [m for m in run_checks() if m.id == "django_jobretry.E026"]
    assert len(errors) == 1
    assert "'nightly'" in errors[0].msg
    assert "cron='0 25 * * *'" in errors[0].msg
