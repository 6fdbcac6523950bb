"""A schedule's runs honour their task's deduplication (issue 24): its key, and its unique_for window.

Slots are made due by moving the schedule's ``next_slot`` back (tests/integration/
schedules/test_schedules_service.py), windows by moving a job's ``finished_at`` back: the
database clock, never sleeps.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.test import override_settings

from django_jobretry.models import Job, JobStatus, Schedule
from django_jobretry.schedules import declared
from django_jobretry.schedules.rows import RunRefused, declare_rows, run_now
from django_jobretry.schedules.runs import run_due
from django_jobretry.testing import run_jobs
from tests.integration.schedules.test_schedules_service import down_for
from tests.jobs_app import unique_jobs

pytestmark = pytest.mark.django_db

#: The invoice of order 9 once a year: keyed by order and copy, and not again for an hour after it ran.
INVOICE = {"task": unique_jobs.invoice.name, "every": 366 * 86400, "args": [9]}
SETTINGS = {"POLICIES": {"three": {"max_attempts": 3}}, "SCHEDULES": {"inv": INVOICE}}


def look() -> Schedule:
    """One worker's look after the schedule missed a slot: the newest due slot runs, if its key is free."""
    with override_settings(JOBRETRY=SETTINGS):
        specs = declared()
        declare_rows(specs)
        down_for("inv", 1)
        run_due(specs)
    return Schedule.objects.get(name="inv")


def test_the_run_takes_its_tasks_key_and_window() -> None:
    row = look()
    run = Job.objects.get(schedule_name="inv")
    assert run.unique_key == unique_jobs.invoice.enqueue(9).unique_key  # one key: the enqueue found the run
    assert run.unique_for == timedelta(hours=1)
    assert (row.runs, row.skipped, Job.objects.count()) == (1, 0, 1)


def test_a_live_job_of_the_key_holds_the_slot_back() -> None:
    manual = unique_jobs.invoice.enqueue(9)
    row = look()
    assert (row.runs, row.skipped) == (0, 1)
    assert list(Job.objects.values_list("pk", flat=True)) == [manual.pk]


def test_a_job_that_succeeded_within_the_window_holds_it_back_and_after_it_the_slot_runs() -> None:
    manual = unique_jobs.invoice.enqueue(9)
    run_jobs()
    assert Job.objects.get(pk=manual.pk).status == JobStatus.SUCCEEDED
    assert (look().runs, Schedule.objects.get(name="inv").skipped) == (0, 1)
    Job.objects.filter(pk=manual.pk).update(finished_at=Now() - timedelta(minutes=61))
    row = look()
    assert (row.runs, row.skipped) == (1, 1)
    assert Job.objects.filter(schedule_name="inv", status=JobStatus.READY).count() == 1


def test_run_now_says_which_job_holds_the_key() -> None:
    manual = unique_jobs.invoice.enqueue(9)
    run_jobs()
    with override_settings(JOBRETRY=SETTINGS):
        declare_rows(declared())
        with pytest.raises(
            RunRefused, match=rf"job {manual.pk} with its task's unique key succeeded less than"
        ):
            run_now("inv", actor="ops")
    assert not Job.objects.filter(schedule_name="inv").exists()
