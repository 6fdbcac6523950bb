"""One bad schedule fails alone: the others are declared and run, and the log names the bad one.

Before, a worker wrote all its schedules with one statement and moved them
all on with another: one value the columns could not hold made both fail at
every look, and every schedule of every worker made no run, with only a
warning. Hostile rows are written straight into the table, as an older
deploy or a hand-made fix may leave them; a failure no check can prevent is
made with a trigger that refuses one schedule's update.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.core.checks import Error
from django.db import connection
from django.db.models import F
from django.test import override_settings

from django_jobretry.models import Job, Schedule
from django_jobretry.policy.slots import Cadence
from django_jobretry.schedules import InvalidSchedule, ScheduleSpec, declared, job_schedule
from django_jobretry.schedules.checks import check_schedule_settings
from django_jobretry.schedules.rows import declare_rows, looks
from django_jobretry.schedules.runs import Scheduler, run_due

pytestmark = pytest.mark.django_db

#: A valid cron expression (every minute of every hour of every day, listed) longer than the column.
LONG_CRON = " ".join(
    [",".join(map(str, range(60))), ",".join(map(str, range(24))), ",".join(map(str, range(1, 32))), "*", "*"]
)
HOURLY = {"task": "tests.jobs_app.jobs.noop", "every": 3600}
BIGINT_MAX = 2**63 - 1


def skipped_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, object]]:
    return [
        (record.levelno, getattr(record, "schedule", None))
        for record in caplog.records
        if getattr(record, "outcome", None) == "skipped_alone"
    ]


def behind(name: str) -> None:
    """Move an hourly schedule one slot back, as though no worker had looked for an hour: it is due."""
    Schedule.objects.filter(name=name).update(next_slot=F("next_slot") - timedelta(hours=1))


def two(**bad: Any) -> dict[str, ScheduleSpec]:
    """Schedules "good" and "bad" (hourly unless ``bad`` says otherwise), declared and one slot behind."""
    with override_settings(JOBRETRY={"SCHEDULES": {"good": HOURLY, "bad": {**HOURLY, **bad}}}):
        specs = declared()
        declare_rows(specs)
        for name in specs:
            behind(name)
    return specs


class TestCheck:
    def test_a_cron_too_long_for_the_column_is_refused_by_check_naming_the_schedule(self) -> None:
        listed = {"task": HOURLY["task"], "cron": LONG_CRON}
        with override_settings(JOBRETRY={"SCHEDULES": {"every-minute": listed}}):
            errors = check_schedule_settings()
        assert [error.id for error in errors] == ["django_jobretry.E040"]
        assert isinstance(errors[0], Error)
        assert "schedule 'every-minute': cron=" in errors[0].msg
        limit = (
            f"at most 291 characters in time zone 'UTC' (what a schedule's row stores), got {len(LONG_CRON)}"
        )
        assert limit in errors[0].msg

    def test_a_job_schedule_too_long_for_the_column_is_refused_where_it_is_declared(self) -> None:
        with pytest.raises(InvalidSchedule, match="at most 291 characters"):
            job_schedule("tests.jobs_app.jobs.noop", cron=LONG_CRON, every=None, tz=None)


class TestRuntime:
    def test_a_cadence_too_long_to_store_is_not_declared_and_the_others_run(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """As a worker of an older version would hold it: past check, in the process's declarations."""
        with override_settings(JOBRETRY={"SCHEDULES": {"good": HOURLY}}):
            specs = declared()
        long = Cadence(cron=LONG_CRON)
        specs["bad"] = ScheduleSpec(name="bad", task_name="tests.jobs_app.jobs.noop", cadence=long)
        with caplog.at_level(logging.INFO, "django_jobretry"):
            declare_rows(specs)
        assert list(Schedule.objects.values_list("name", flat=True)) == ["good"]
        refused = [r for r in caplog.records if getattr(r, "outcome", None) == "schedule_not_declared"]
        assert [(r.levelno, r.schedule) for r in refused] == [(logging.ERROR, "bad")]  # type: ignore[attr-defined]
        assert "cadence" in refused[0].getMessage()
        assert "300" in refused[0].getMessage()
        behind("good")
        run_due(specs)
        assert Schedule.objects.get(name="good").runs == 1

    def test_counts_at_the_column_maximum_stay_there_and_every_schedule_runs(self) -> None:
        specs = two()
        Schedule.objects.filter(name="bad").update(runs=BIGINT_MAX, missed=BIGINT_MAX, skipped=BIGINT_MAX)
        run_due(specs)
        good, bad = Schedule.objects.get(name="good"), Schedule.objects.get(name="bad")
        assert (good.runs, bad.runs, bad.missed) == (1, BIGINT_MAX, BIGINT_MAX)
        assert Job.objects.filter(schedule_name="bad").count() == 1
        assert bad.last_job_id == Job.objects.get(schedule_name="bad").pk

    def test_a_schedule_the_database_refuses_to_move_on_is_skipped_and_named_once_per_stretch(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        specs = two()
        before = Schedule.objects.get(name="bad").next_slot
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE FUNCTION pg_temp.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.name = 'bad' THEN RAISE EXCEPTION 'refused' USING ERRCODE = '22003'; END IF; "
                "RETURN NEW; END $$"
            )
            cursor.execute(
                f"CREATE TRIGGER refuse BEFORE UPDATE ON {Schedule._meta.db_table} "
                "FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse()"
            )
        looked = looks()
        with caplog.at_level(logging.DEBUG, "django_jobretry"):
            until = run_due(specs, looked)
            run_due(specs, looked)  # the bad one is still due, and fails again
        assert Schedule.objects.get(name="good").runs == 1
        assert Schedule.objects.get(name="bad").next_slot == before  # left as it was: due at the next look
        assert not Job.objects.filter(schedule_name="bad").exists()  # its run went with its savepoint
        assert skipped_lines(caplog) == [(logging.ERROR, "bad"), (logging.DEBUG, "bad")]
        line = next(r for r in caplog.records if getattr(r, "outcome", None) == "skipped_alone")
        assert line.getMessage().startswith("schedule bad skipped: could not ")
        assert line.sqlstate == "22003"  # type: ignore[attr-defined]
        # The failing one does not make the scheduler look again at once: the good one's slot decides.
        assert until is not None
        assert until > 0
        runs = [r for r in caplog.records if getattr(r, "outcome", None) == "schedule_run"]
        assert [r.schedule for r in runs] == ["good"]  # type: ignore[attr-defined]


@pytest.mark.django_db(transaction=True)
def test_the_scheduler_thread_runs_the_others_while_one_fails_look_after_look(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A real thread on its own connection: the refusal is committed, as another deploy's would be."""
    every_second = {"task": "tests.jobs_app.jobs.noop", "every": 1, "overlap": "allow"}
    with override_settings(JOBRETRY={"SCHEDULES": {"good": every_second, "bad": HOURLY}}):
        specs = declared()
    declare_rows(specs)
    behind("bad")
    before = Schedule.objects.get(name="bad").next_slot
    table = Schedule._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION jobretry_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.name = 'bad' THEN RAISE EXCEPTION 'refused' USING ERRCODE = '22003'; END IF; "
            "RETURN NEW; END $$"
        )
        cursor.execute(
            f"CREATE TRIGGER jobretry_test_refuse BEFORE UPDATE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION jobretry_test_refuse()"
        )
    stop = threading.Event()
    scheduler = Scheduler("w", lambda: specs, stop)
    try:
        with caplog.at_level(logging.DEBUG, "django_jobretry"):
            scheduler.start()  # the duty starts its own thread
            deadline = time.monotonic() + 30
            while Schedule.objects.get(name="good").runs < 3:
                assert time.monotonic() < deadline, "the good schedule stopped running"
                stop.wait(0.1)
            stop.set()
            scheduler.thread.join(timeout=10)
    finally:
        stop.set()
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TRIGGER IF EXISTS jobretry_test_refuse ON {table}")
            cursor.execute("DROP FUNCTION IF EXISTS jobretry_test_refuse()")
    assert not scheduler.thread.is_alive()
    assert Schedule.objects.get(name="bad").next_slot == before
    assert not Job.objects.filter(schedule_name="bad").exists()
    lines = skipped_lines(caplog)
    assert lines[0] == (logging.ERROR, "bad")
    assert len(lines) >= 2
    assert set(lines[1:]) == {(logging.DEBUG, "bad")}
    assert not [r for r in caplog.records if r.getMessage().startswith("could not look at the schedules")]
