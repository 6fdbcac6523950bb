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
from datetime import datetime

import pytest
from django.db import connection
from django.db.models import Count

from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution
from tests.processes import (
    ROOT,
    Workers,
    db_now,
    finish,
    lease_expired,
    listen_sessions,
    owner_pid,
    pids,
    runs,
    spawn,
    test_database_url,
    wait_until,
)

pytestmark = pytest.mark.django_db(transaction=True)


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
    assert (
        f"job {job.pk} attempt 1 ({job.task_name}, queue default) succeeded after losing its lease" in output
    ), output
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
    assert (
        f"job {job.pk} attempt 1 ({job.task_name}, queue default) succeeded after losing its lease; "
        "outcome ignored" in a_output
    ), a_output
    code, b_output = finish(b, timeout=30)
    assert code == 0, b_output
    assert "outcome ignored" not in b_output, b_output

    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.SUCCEEDED, 2)
    assert [(entry["attempt"], entry["ended"]) for entry in job.errors] == [(1, "lease_expired")]
    assert not DeadLetter.objects.filter(job_id=job.pk).exists()
    assert pids("overlap") == [a.pid, b.pid]


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
    """A worker session has run its claim query since ``moment`` (or in the statement then) and is idle."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND state = 'idle' AND query LIKE %s AND query_start >= %s",
            ["%picked AS (%", moment],  # the claim, alone or with successes
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
    # The statement that records the success also claims (nothing due), then the
    # loop waits 300 s: from here on it is idle, and the deadline below is far
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
        (["--lease", "0.5"], "0.5 is invalid: a lease is 1 to 86400 seconds"),
        (["--lease", "-1"], "-1 is invalid: a lease is 1 to 86400 seconds"),
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
