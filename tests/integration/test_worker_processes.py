"""Real `manage.py runworker` processes against real PostgreSQL: the worker rules of docs/design.md.

Every wait is a database (or process) condition with a hard deadline; nothing
sleeps and hopes. Assertions are about counts, orders and final states, never
about how long something took: a deadline only bounds a test that would
otherwise hang, and is always far from the duration that would make it pass
for the wrong reason.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.db.models import Count
from django.db.models.functions import Now

from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution
from tests.processes import ROOT, finish, spawn_worker, test_database_url, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

Workers = list[subprocess.Popen[str]]

# The last query of a worker's LISTEN session (worker/listener.py).
LISTEN_QUERY = "LISTEN django_jobretry"


def runs(key: str) -> int:
    return Execution.objects.filter(key=key).count()


def pids(key: str) -> list[int]:
    return list(Execution.objects.filter(key=key).order_by("id").values_list("pid", flat=True))


def db_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        value: datetime = cursor.fetchone()[0]
    return value


def listen_sessions(since: datetime) -> list[int]:
    """Backend pids of LISTEN sessions on this database opened after ``since``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = %s "
            "AND backend_start >= %s AND pid <> pg_backend_pid()",
            [LISTEN_QUERY, since],
        )
        return [row[0] for row in cursor.fetchall()]


def session_alive(backend_pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [backend_pid])
        return cursor.fetchone() is not None


def lease_expired(job_id: int) -> bool:
    """By the database clock (docs/design.md#rule-5), like the worker's recovery."""
    return Job.objects.filter(pk=job_id, status=JobStatus.RUNNING, lease_expires_at__lt=Now()).exists()


def owner_pid(lease_owner: str) -> int:
    """The pid in a worker id ``host:pid:random``."""
    return int(lease_owner.rsplit(":", 2)[1])


def spawn(workers: Workers, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    workers.append(process := spawn_worker(*args, env=env))
    return process


# -- 1. concurrency ------------------------------------------------------------------------


def test_three_worker_processes_run_every_job_exactly_once(workers: Workers) -> None:
    total = 3000
    jobs.record.bulk_enqueue([((f"k{i}",), {}) for i in range(total)])
    processes = [spawn(workers, "--concurrency", "4", "--burst") for _ in range(3)]
    for process in processes:
        code, output = finish(process, timeout=100)
        assert code == 0, output

    per_key = Counter(dict(Execution.objects.values_list("key").annotate(n=Count("id"))))
    assert len(per_key) == total
    assert set(per_key.values()) == {1}, [key for key, n in per_key.items() if n != 1][:10]
    assert Execution.objects.count() == total
    assert set(Execution.objects.values_list("attempt", flat=True)) == {1}
    assert Job.objects.filter(status=JobStatus.SUCCEEDED, attempts=1).count() == total
    assert Job.objects.exclude(errors=[]).count() == 0
    assert not DeadLetter.objects.exists()
    worker_pids = {process.pid for process in processes}
    used = set(Execution.objects.values_list("pid", flat=True))
    assert used <= worker_pids
    assert len(used) > 1, "all jobs ran in one process: the workers did not share the queue"


# -- 2. crash recovery ---------------------------------------------------------------------


def test_sigkilled_worker_job_is_recovered_by_another_after_the_lease(workers: Workers) -> None:
    job = jobs.sleepy.enqueue("crash", 3)
    a = spawn(workers, "--lease", "1")
    wait_until(lambda: runs("crash") == 1, timeout=30, what="worker A to start the job")
    lease_owner = Job.objects.get(pk=job.pk).lease_owner
    assert owner_pid(lease_owner) == a.pid
    a.kill()
    code, _ = finish(a, timeout=10)
    assert code == -signal.SIGKILL

    wait_until(lambda: lease_expired(job.pk), timeout=10, what="A's lease to expire")
    # Not --burst: recovery schedules the retry after the policy's backoff, so
    # the job is not due yet when B looks first; B runs until it ran one job.
    b = spawn(workers, "--max-jobs", "1")
    code, output = finish(b, timeout=30)
    assert code == 0, output

    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.SUCCEEDED, 2)
    assert [entry["ended"] for entry in job.errors] == ["lease_expired"]
    assert job.errors[0]["attempt"] == 1
    assert job.errors[0]["worker"] == lease_owner
    assert lease_owner in job.errors[0]["message"]
    assert pids("crash") == [a.pid, b.pid]
    assert list(Execution.objects.filter(key="crash").order_by("id").values_list("attempt", flat=True)) == [
        1,
        2,
    ]


def test_a_job_that_crashes_every_worker_ends_as_a_lease_expired_dead_letter(workers: Workers) -> None:
    job = jobs.sleepy.using(policy="three").enqueue("crash-loop", 60)
    assert job.max_attempts == 3

    def started(attempt: int) -> Callable[[], bool]:
        return lambda: runs("crash-loop") == attempt

    killed: list[int] = []
    owners: list[str] = []
    for attempt in (1, 2, 3):
        # From the second round on, the new worker first recovers the previous
        # worker's expired lease, then claims the job again.
        process = spawn(workers, "--lease", "1")
        wait_until(started(attempt), timeout=30, what=f"attempt {attempt} to start")
        row = Job.objects.get(pk=job.pk)
        assert (row.status, row.attempts, owner_pid(row.lease_owner)) == (
            JobStatus.RUNNING,
            attempt,
            process.pid,
        )
        owners.append(row.lease_owner)
        process.kill()
        finish(process, timeout=10)
        killed.append(process.pid)

    wait_until(lambda: lease_expired(job.pk), timeout=10, what="the last lease to expire")
    code, output = finish(spawn(workers, "--burst"), timeout=30)
    assert code == 0, output

    assert not Job.objects.filter(pk=job.pk).exists()
    dead = DeadLetter.objects.get(job_id=job.pk)
    assert (dead.reason, dead.attempts, dead.max_attempts) == ("lease_expired", 3, 3)
    assert [entry["ended"] for entry in dead.errors] == ["lease_expired"] * 3
    assert [entry["attempt"] for entry in dead.errors] == [1, 2, 3]
    assert [entry["worker"] for entry in dead.errors] == owners
    assert pids("crash-loop") == killed
    assert len(set(killed)) == 3
    assert "lease expired" in dead.last_error


# -- 3. fencing ------------------------------------------------------------------------------


def test_a_paused_worker_cannot_record_its_stale_outcome(workers: Workers) -> None:
    job = jobs.sleepy.enqueue("fenced", 2)
    # --max-jobs 1: A exits by itself once it has dealt with its one outcome.
    a = spawn(workers, "--lease", "1", "--max-jobs", "1")
    wait_until(lambda: runs("fenced") == 1, timeout=30, what="worker A to start the job")
    a_owner = Job.objects.get(pk=job.pk).lease_owner
    a.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: lease_expired(job.pk), timeout=10, what="A's lease to expire while paused")
        code, output = finish(spawn(workers, "--max-jobs", "1"), timeout=30)
        assert code == 0, output
        assert "outcome ignored" not in output, output
        final = Job.objects.get(pk=job.pk)
        assert (final.status, final.attempts) == (JobStatus.SUCCEEDED, 2)
    finally:
        a.send_signal(signal.SIGCONT)
    code, output = finish(a, timeout=30)
    assert code == 0, output

    assert "outcome ignored" in output, output
    assert f"job {job.pk} attempt 1 succeeded after losing its lease" in output, output
    after = Job.objects.get(pk=job.pk)
    assert (after.status, after.attempts, after.finished_at, after.errors) == (
        final.status,
        final.attempts,
        final.finished_at,
        final.errors,
    )
    assert [entry["ended"] for entry in after.errors] == ["lease_expired"]
    assert after.errors[0]["worker"] == a_owner
    assert not DeadLetter.objects.filter(job_id=job.pk).exists()
    assert pids("fenced")[0] == a.pid
    assert len(set(pids("fenced"))) == 2


def test_a_resumed_worker_cannot_finish_the_attempt_another_worker_is_running(workers: Workers) -> None:
    """The stale outcome arrives while the job is running again: only the lease token tells them apart."""
    job = jobs.sleepy.enqueue("overlap", 5)
    a = spawn(workers, "--lease", "1", "--max-jobs", "1")
    wait_until(lambda: runs("overlap") == 1, timeout=30, what="worker A to start the job")
    a.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: lease_expired(job.pk), timeout=10, what="A's lease to expire while paused")
        b = spawn(workers, "--max-jobs", "1")
        wait_until(lambda: runs("overlap") == 2, timeout=30, what="worker B to start attempt 2")
    finally:
        a.send_signal(signal.SIGCONT)
    # A's handler started first, so it normally ends while B's attempt 2 still
    # runs; either way A's success must change nothing.
    code, a_output = finish(a, timeout=30)
    assert code == 0, a_output
    assert f"job {job.pk} attempt 1 succeeded after losing its lease; outcome ignored" in a_output, a_output
    code, b_output = finish(b, timeout=30)
    assert code == 0, b_output
    assert "outcome ignored" not in b_output, b_output

    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.SUCCEEDED, 2)
    assert [(entry["attempt"], entry["ended"]) for entry in job.errors] == [(1, "lease_expired")]
    assert not DeadLetter.objects.filter(job_id=job.pk).exists()
    assert pids("overlap") == [a.pid, b.pid]


# -- 4. graceful shutdown -----------------------------------------------------------------------


def test_sigterm_lets_the_running_job_finish_and_starts_nothing_else(workers: Workers) -> None:
    running = jobs.sleepy.enqueue("graceful", 2)
    queued = jobs.record.bulk_enqueue([((f"queued{i}",), {}) for i in range(5)])
    process = spawn(workers, "--concurrency", "1", "--shutdown-timeout", "10")
    wait_until(lambda: runs("graceful") == 1, timeout=30, what="the sleepy job to start")
    process.send_signal(signal.SIGTERM)
    code, output = finish(process, timeout=30)
    assert code == 0, output

    running.refresh_from_db()
    assert (running.status, running.attempts, running.errors) == (JobStatus.SUCCEEDED, 1, [])
    assert runs("graceful") == 1
    left = Job.objects.filter(pk__in=[job.pk for job in queued])
    assert sorted(left.values_list("status", "attempts")) == [(JobStatus.READY, 0)] * 5
    assert not Execution.objects.filter(key__startswith="queued").exists()


def test_sigterm_while_starting_exits_0_before_claiming(workers: Workers, tmp_path: Path) -> None:
    job = jobs.record.enqueue("never-started")
    gate = tmp_path / "gate"
    process = spawn(workers, env={"JOBRETRY_TEST_STARTUP_GATE": str(gate)})
    wait_until(Path(f"{gate}.reached").exists, timeout=30, what="the worker to be importing jobs.py")
    process.send_signal(signal.SIGTERM)
    Path(f"{gate}.open").touch()
    code, output = finish(process, timeout=30)
    assert code == 0, output
    assert "stop requested while starting" in output, output
    assert runs("never-started") == 0
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.READY, 0)


def test_sigterm_past_the_grace_period_ends_the_attempt_as_shutdown(workers: Workers) -> None:
    job = jobs.sleepy.enqueue("cut", 60)
    process = spawn(workers, "--concurrency", "1", "--shutdown-timeout", "0.5", "--lease", "7")
    wait_until(lambda: runs("cut") == 1, timeout=30, what="the sleepy job to start")
    process.send_signal(signal.SIGTERM)
    # Far less than the job's 60 s: the worker does not wait for it.
    code, output = finish(process, timeout=20)
    assert code == 0, output

    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.READY, 1)
    assert job.lease_token is None
    assert [(entry["attempt"], entry["ended"]) for entry in job.errors] == [(1, "shutdown")]
    assert runs("cut") == 1
    # Not claimable before the abandoned handler's process is surely gone: one lease.
    assert job.errors[0]["delay"] == 7
    assert job.run_at - datetime.fromisoformat(job.errors[0]["at"]) == timedelta(seconds=7)


def test_heartbeats_continue_while_draining_so_no_one_recovers_the_job(workers: Workers) -> None:
    """Rule 7: a job finishing within the grace period but past its lease keeps its lease."""
    job = jobs.sleepy.enqueue("draining", 6)
    a = spawn(workers, "--lease", "2", "--shutdown-timeout", "30")
    wait_until(lambda: runs("draining") == 1, timeout=30, what="worker A to start the job")
    since = db_now()
    # B recovers expired leases every second: it would take the job over if
    # A stopped heartbeating during its drain.
    b = spawn(workers)
    wait_until(lambda: len(listen_sessions(since)) == 1, timeout=30, what="worker B to be up")
    a.send_signal(signal.SIGTERM)
    code, output = finish(a, timeout=30)
    assert code == 0, output
    assert "lost its lease" not in output, output

    job.refresh_from_db()
    assert (job.status, job.attempts, job.errors) == (JobStatus.SUCCEEDED, 1, [])
    b.send_signal(signal.SIGTERM)
    code, output = finish(b, timeout=30)
    assert code == 0, output
    assert pids("draining") == [a.pid]


# -- 5. second signal ---------------------------------------------------------------------------


def test_a_second_sigterm_exits_at_once_with_code_1(workers: Workers) -> None:
    since = db_now()
    job = jobs.sleepy.enqueue("stuck", 60)
    process = spawn(workers, "--shutdown-timeout", "60")
    wait_until(lambda: runs("stuck") == 1, timeout=30, what="the sleepy job to start")
    wait_until(lambda: len(listen_sessions(since)) == 1, timeout=10, what="the worker's LISTEN session")
    [listener] = listen_sessions(since)
    process.send_signal(signal.SIGTERM)
    # The listener closes its session when the worker starts stopping: proof
    # the first signal was handled, so the second is not merged with it.
    wait_until(lambda: not session_alive(listener), timeout=10, what="the first SIGTERM to be handled")
    assert process.poll() is None, "the first SIGTERM must not end a worker whose job runs for 60 s"
    process.send_signal(signal.SIGTERM)
    code, output = finish(process, timeout=10)
    assert code == 1, output

    job.refresh_from_db()
    assert (job.status, job.attempts, job.errors) == (JobStatus.RUNNING, 1, [])
    assert owner_pid(job.lease_owner) == process.pid
    assert job.lease_expires_at is not None


# -- 6. reconnect ---------------------------------------------------------------------------------


def test_worker_reconnects_after_its_sessions_are_terminated(workers: Workers) -> None:
    since = db_now()
    process = spawn(workers)
    wait_until(lambda: len(listen_sessions(since)) == 1, timeout=30, what="the worker's LISTEN session")
    jobs.record.enqueue("before")
    wait_until(
        lambda: Job.objects.filter(args=["before"], status=JobStatus.SUCCEEDED).exists(),
        timeout=30,
        what="the first job to succeed",
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        terminated = [row[0] for row in cursor.fetchall()]
    # The worker's main loop and LISTEN sessions at least; each one ended.
    assert len(terminated) >= 2
    assert all(terminated)
    after = jobs.record.enqueue("after")
    wait_until(lambda: runs("after") == 1, timeout=30, what="the worker to reconnect and run the job")
    wait_until(
        lambda: Job.objects.filter(pk=after.pk, status=JobStatus.SUCCEEDED).exists(),
        timeout=30,
        what="the job's success to be recorded",
    )
    assert process.poll() is None, "the worker exited instead of reconnecting"
    process.send_signal(signal.SIGTERM)
    code, output = finish(process, timeout=30)
    assert code == 0, output
    assert "database unavailable; reconnecting" in output, output
    assert pids("before") == pids("after") == [process.pid]


# -- 7. LISTEN/NOTIFY ---------------------------------------------------------------------------


def claimed_since(moment: datetime) -> bool:
    """A worker session has run its claim query since ``moment`` and is idle again."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND state = 'idle' AND query LIKE %s AND query_start > %s",
            ["%WITH picked AS%", moment],
        )
        return cursor.fetchone() is not None


# runworker's idle loop wakes at least every second to recover expired leases
# (WorkerOptions.recover_every), whatever POLL_SECONDS says. Such a wake does
# not claim, but to leave a notification as the only thing that wakes the
# loop at all, this process runs the same engine with that interval raised too.
IDLE_FOR_MINUTES = (
    "import django; django.setup(); "
    "from django_jobretry.worker import Worker, WorkerOptions; "
    "raise SystemExit(Worker(WorkerOptions(recover_every=300)).run())"
)


def spawn_idle_for_minutes(workers: Workers) -> subprocess.Popen[str]:
    environment = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONUNBUFFERED": "1",
        # The longest poll interval the settings allow.
        "JOBRETRY_TEST_POLL_SECONDS": "300",
    }
    process = subprocess.Popen(
        [sys.executable, "-c", IDLE_FOR_MINUTES],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    workers.append(process)
    return process


def test_notify_wakes_an_idle_worker_that_would_not_poll_for_minutes(workers: Workers) -> None:
    since = db_now()
    process = spawn_idle_for_minutes(workers)
    wait_until(lambda: len(listen_sessions(since)) == 1, timeout=30, what="the worker's LISTEN session")
    first = jobs.record.enqueue("first")
    wait_until(
        lambda: Job.objects.filter(pk=first.pk, status=JobStatus.SUCCEEDED).exists(),
        timeout=20,
        what="the first job to succeed",
    )
    finished_at = Job.objects.get(pk=first.pk).finished_at
    assert finished_at is not None
    # After recording the success the loop claims once more (nothing due) and
    # then waits 300 s: from here on it is idle, and the deadline below is far
    # shorter than its next poll.
    wait_until(lambda: claimed_since(finished_at), timeout=20, what="the worker to go idle")
    second = jobs.record.enqueue("second")
    wait_until(lambda: runs("second") == 1, timeout=20, what="the notification to wake the worker")
    wait_until(
        lambda: Job.objects.filter(pk=second.pk, status=JobStatus.SUCCEEDED).exists(),
        timeout=20,
        what="the second job to succeed",
    )
    process.send_signal(signal.SIGTERM)
    code, output = finish(process, timeout=30)
    assert code == 0, output
    assert pids("first") == pids("second") == [process.pid]


# -- 8. queue filter ------------------------------------------------------------------------------


def test_queue_option_runs_only_that_queue(workers: Workers) -> None:
    default = jobs.record.enqueue("in-default")
    others = [jobs.other_queue.enqueue(f"in-other{i}") for i in range(3)]
    code, output = finish(spawn(workers, "--queue", "other", "--burst"), timeout=30)
    assert code == 0, output

    default.refresh_from_db()
    assert (default.status, default.attempts) == (JobStatus.READY, 0)
    assert runs("in-default") == 0
    assert (
        sorted(Job.objects.filter(queue_name="other").values_list("status", "attempts"))
        == [(JobStatus.SUCCEEDED, 1)] * 3
    )
    assert [runs(f"in-other{i}") for i in range(3)] == [1, 1, 1]
    assert {job.queue_name for job in others} == {"other"}


# -- 9. bad options ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrency", "0"], "--concurrency"),
        (["--concurrency", "two"], "--concurrency"),
        (["--lease", "abc"], "--lease"),
        (["--lease", "0.5"], "--lease"),
        (["--queue", "bad name!"], "--queue"),
        (["--max-jobs", "-1"], "--max-jobs"),
        (["--shutdown-timeout", "-1"], "--shutdown-timeout"),
    ],
)
def test_bad_options_exit_non_zero_naming_the_option_and_touch_nothing(
    workers: Workers, args: list[str], message: str
) -> None:
    job = jobs.record.enqueue("untouched")
    before = list(Job.objects.order_by("id").values())
    code, output = finish(spawn(workers, *args, "--burst"), timeout=30)
    assert code != 0, output
    assert message in output, output
    assert "Traceback" not in output, output
    assert list(Job.objects.order_by("id").values()) == before
    assert Job.objects.get(pk=job.pk).attempts == 0
    assert runs("untouched") == 0
