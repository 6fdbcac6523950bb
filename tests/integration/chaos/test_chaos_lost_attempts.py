"""The duplicate-start invariant: a lost attempt no fault explains is reported with what explains a failure.

A run's worker logs and database are gone once a CI job ends, so the
report itself must say when the attempt started and ended, which fault of
its worker was nearest, and what the workers warned about around it. The
harness's tables are installed in the test database (rolled back with the
test); attempts and faults are written as the harness writes them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection

from chaos import schema
from chaos.invariants import duplicate_starts
from django_jobretry.deadletters import requeue_many
from django_jobretry.jobs import recovery
from django_jobretry.models import Job
from tests.attempts import claim_one, kill
from tests.declarations import forgotten_afterwards

pytestmark = pytest.mark.django_db

SLACK = timedelta(seconds=5)


@pytest.fixture(autouse=True)
def harness_tables() -> None:
    schema.install()


def lost_attempt(job_id: int, pid: int, started: datetime) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO chaos_attempt (job_id, attempt, pid, started_at) VALUES (%s, 1, %s, %s)",
            [job_id, pid, started],
        )


def fault(pid: int, started: datetime, ended: datetime) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO chaos_fault (kind, target_pid, started_at, ended_at) "
            "VALUES ('partition', %s, %s, %s)",
            [pid, started, ended],
        )


def test_a_requeued_job_s_lost_attempt_is_not_hidden_by_the_history_it_carries() -> None:
    """The dead letter's "attempt 1 fatal" entry comes along; the new attempt 1 is lost all the same."""
    dead = kill()
    [job] = requeue_many([dead.id]).jobs
    job_id = job.id
    claimed = claim_one()
    assert (claimed.id, claimed.attempt) == (job_id, 1)
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO chaos_attempt (job_id, attempt, pid) VALUES (%s, 1, 41)", [job_id])
    Job.objects.filter(pk=job_id).update(lease_expires_at=datetime(2000, 1, 1, tzinfo=UTC))
    assert [item.id for item in recovery.recover_expired(100, 10)] == [job_id]
    check, _, _, unexplained = duplicate_starts(SLACK)
    assert [v.split(": started")[0] for v in check.violations] == [
        f"job {job_id} attempt 1 (pid 41) lost with no fault near it"
    ]
    assert "ended lease_expired" in check.violations[0]
    assert len(unexplained) == 1


def test_a_lost_attempt_in_a_fault_window_is_explained() -> None:
    at = datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC)
    fault(41, at, at + timedelta(seconds=12))
    lost_attempt(1, 41, at + timedelta(seconds=12) + SLACK - timedelta(seconds=1))
    check, _, by_kind, unexplained = duplicate_starts(SLACK)
    assert (check.checked, check.violations, unexplained) == (1, [], [])
    assert by_kind["partition"] == 1


def test_a_lost_attempt_far_from_its_workers_faults_is_reported_with_its_times(tmp_path: Path) -> None:
    at = datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC)
    fault(41, at, at + timedelta(seconds=12))
    fault(42, at + timedelta(seconds=30), at + timedelta(seconds=31))  # another worker's: no excuse
    started = at + timedelta(seconds=30, milliseconds=250)
    lost_attempt(1, 41, started)
    check, _, _, unexplained = duplicate_starts(SLACK)
    assert check.violations == [
        "job 1 attempt 1 (pid 41) lost with no fault near it: started 12:00:30.250, handler ended -, "
        "ended never at -; nearest fault of that worker: partition 12:00:00.000-12:00:12.000"
    ]
    assert unexplained == [(41, started, None)]
    local = started.astimezone()  # the worker logs are in local time
    (tmp_path / "worker-0.log").write_text(
        f"{local - timedelta(seconds=3):%Y-%m-%d %H:%M:%S},000 WARNING near it, before\n"
        f"{local:%Y-%m-%d %H:%M:%S},500 INFO not a warning\n"
        f"{local + timedelta(seconds=4):%Y-%m-%d %H:%M:%S},000 ERROR near it, after\n"
        f"{local + timedelta(minutes=1):%Y-%m-%d %H:%M:%S},000 WARNING a minute later\n"
    )
    with forgotten_afterwards():  # chaos.report imports the harness's tasks: never at collection (E009)
        from chaos.report import worker_lines

    lines = worker_lines(tmp_path, unexplained)
    assert [line.split(" ", 3)[-1] for line in lines] == ["WARNING near it, before", "ERROR near it, after"]
    assert all(line.startswith("worker-0: ") for line in lines)


def test_a_worker_stopped_before_it_started_may_exit_minus_15_and_one_that_started_may_not(
    tmp_path: Path,
) -> None:
    """Python's and Django's imports come before any handler of ours; after the start, -15 is a finding."""
    with forgotten_afterwards():
        from chaos.processes import Exit, Pool
        from chaos.report import processes

    (tmp_path / "worker-0.log").write_text("2026-12-07 16:59:13,115 INFO worker vm:501:651b2a0d started\n")
    pool = Pool(env={}, log_dir=tmp_path)
    pool.exits = [
        Exit("worker-0", 501, -15, True, stopped=True),  # it had started: its handler should have run
        Exit("worker-0", 502, -15, True, stopped=True),  # stopped while importing: nothing of ours ran
        Exit("operator-a", 503, -15, True, stopped=True),  # a sidecar is not excused
    ]

    class Fed:
        error = None

    check = processes(pool, Fed(), True, tmp_path)  # type: ignore[arg-type]
    assert check.violations == [
        "worker-0 pid 501: SIGTERM stop exited -15",
        "operator-a pid 503: SIGTERM stop exited -15",
    ]
