"""Due slots become runs: catch-up after downtime and overlap, on the real database clock.

Downtime is made by moving a schedule's ``next_slot`` back by whole slots, so
what is due is decided by counting slots, never by waiting for them. Slots are
366 days apart (the longest interval): the newest missed slot falls within
catch_up "none"'s one-minute grace of now once in about 500,000 runs, where an
hourly one did once in 60.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings

from django_jobretry.deadletters import requeue
from django_jobretry.jobs.recovery import recover_expired
from django_jobretry.models import DeadLetter, DeadReason, Job, JobStatus, Schedule
from django_jobretry.schedules import declared
from django_jobretry.schedules.rows import declare_rows
from django_jobretry.schedules.runs import run_due
from tests.processes import db_now

pytestmark = pytest.mark.django_db

RARE = {"task": "tests.jobs_app.jobs.record", "every": 366 * 86400, "args": ["tick"]}


def down_for(name: str, slots: int) -> list[datetime]:
    """Move ``name`` back as though no worker looked for ``slots`` slots; those slots, oldest first."""
    spec = declared()[name]
    missed = []
    for slot in spec.cadence.slots_before(db_now()):
        missed.append(slot)
        if len(missed) == slots:
            break
    Schedule.objects.filter(name=name).update(next_slot=missed[-1])
    return missed[::-1]


def look(**options: Any) -> Schedule:
    with override_settings(
        JOBRETRY={"POLICIES": {"three": {"max_attempts": 3}}, "SCHEDULES": {"s": {**RARE, **options}}}
    ):
        specs = declared()
        declare_rows(specs)
        missed = down_for("s", 10)
        run_due(specs)
    row = Schedule.objects.get(name="s")
    row.missed_slots = missed  # type: ignore[attr-defined]
    return row


def test_latest_runs_the_newest_slot_once_and_counts_nine_collapsed() -> None:
    row = look()
    runs = list(Job.objects.filter(schedule_name="s"))
    assert [job.schedule_slot for job in runs] == [row.missed_slots[-1]]  # type: ignore[attr-defined]
    assert (row.runs, row.missed, row.skipped) == (1, 9, 0)
    assert row.next_slot > db_now()
    assert row.last_job_id == runs[0].pk
    assert runs[0].unique_key == "schedule:s"
    assert runs[0].status == JobStatus.READY


def test_all_with_a_limit_of_five_runs_the_five_newest_and_counts_five() -> None:
    row = look(catch_up="all", catch_up_limit=5, overlap="allow")
    slots = sorted(job.schedule_slot for job in Job.objects.filter(schedule_name="s") if job.schedule_slot)
    assert slots == row.missed_slots[5:]  # type: ignore[attr-defined]
    assert (row.runs, row.missed) == (5, 5)


def test_none_runs_nothing_late_and_counts_ten() -> None:
    row = look(catch_up="none")
    assert not Job.objects.filter(schedule_name="s").exists()
    assert (row.runs, row.missed) == (0, 10)


def test_skip_runs_one_of_five_while_the_first_is_live() -> None:
    row = look(catch_up="all", catch_up_limit=5)
    assert Job.objects.filter(schedule_name="s").count() == 1
    assert (row.runs, row.skipped, row.missed) == (1, 4, 5)


def test_queue_keeps_the_next_slot_waiting_for_the_live_run() -> None:
    row = look(catch_up="all", catch_up_limit=5, overlap="queue")
    assert Job.objects.filter(schedule_name="s").count() == 1
    assert (row.runs, row.skipped, row.missed) == (1, 0, 5)
    assert row.next_slot == row.missed_slots[6]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("window", "status"), [(timedelta(hours=1), JobStatus.READY), (timedelta(0), None)])
def test_a_lost_run_is_retried_only_if_the_retry_starts_before_the_next_slot(
    window: timedelta, status: JobStatus | None
) -> None:
    """Lease recovery keeps a run's window too: at the next slot or after, it dies ("deadline")."""
    look()
    run = Job.objects.get(schedule_name="s")
    Job.objects.filter(pk=run.pk).update(
        status=JobStatus.RUNNING,
        attempts=1,
        lease_token=uuid.uuid4(),
        lease_owner="gone",
        lease_expires_at=db_now() - timedelta(seconds=1),
        retry_until=db_now() + window,
    )
    recover_expired(limit=10, history_limit=10)
    if status is None:
        assert not Job.objects.filter(pk=run.pk).exists()
        assert DeadLetter.objects.get(job_id=run.pk).reason == DeadReason.DEADLINE
    else:
        assert Job.objects.get(pk=run.pk).status == status


def test_a_dead_run_keeps_its_schedule_and_slot_and_requeues_like_any_dead_letter() -> None:
    look()
    run = Job.objects.get(schedule_name="s")
    Job.objects.filter(pk=run.pk).update(
        status=JobStatus.RUNNING,
        attempts=1,
        lease_token=uuid.uuid4(),
        lease_owner="gone",
        lease_expires_at=db_now() - timedelta(seconds=1),
        retry_until=db_now(),
    )
    recover_expired(limit=10, history_limit=10)
    letter = DeadLetter.objects.get(job_id=run.pk)
    assert (letter.schedule_name, letter.schedule_slot) == ("s", run.schedule_slot)

    again = requeue(letter.pk, actor="ops")
    assert isinstance(again, Job)
    assert (again.schedule_name, again.schedule_slot, again.unique_key) == (
        "s",
        run.schedule_slot,
        "schedule:s",
    )
    assert again.retry_until is None, "a replay is not cut off by a slot long gone"
    assert again.requeue_count == 1


@pytest.mark.parametrize(
    ("bad", "policies"),
    [
        ({**RARE, "queue": "q" * 101}, {"three": {"max_attempts": 3}}),  # a queue enqueue refuses
        (RARE, {}),  # the task's policy "three" is not in the settings
    ],
    ids=["bad-queue", "unknown-policy"],
)
def test_a_schedule_that_cannot_make_a_run_is_refused_and_the_others_still_run(
    bad: dict[str, Any], policies: dict[str, Any]
) -> None:
    """Counted as refused on its own row, never a failed look that would stop every schedule."""
    good = {"task": "tests.jobs_app.jobs.noop", "every": 3600}
    with override_settings(JOBRETRY={"POLICIES": policies, "SCHEDULES": {"good": good, "bad": bad}}):
        specs = declared()
        declare_rows(specs)
        for name in specs:
            down_for(name, 1)
        run_due(specs)
    assert Schedule.objects.get(name="good").runs == 1
    assert Schedule.objects.get(name="bad").refused == 1
    assert not Job.objects.filter(schedule_name="bad").exists()
