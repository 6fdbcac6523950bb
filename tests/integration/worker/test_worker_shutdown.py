"""Real `manage.py runworker` processes stopping: SIGTERM, the grace period, a second signal.

The stop rules of docs/worker.md#stopping-signals-and-graceful-shutdown and
docs/design.md#rule-7, on real processes against real PostgreSQL; every wait
has a hard deadline (see test_worker_processes.py for the conventions).
"""

from __future__ import annotations

import signal
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from django_jobretry.models import Job, JobStatus
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution
from tests.processes import (
    Workers,
    db_now,
    finish,
    listen_sessions,
    owner_pid,
    pids,
    runs,
    session_alive,
    spawn,
    wait_until,
)

pytestmark = pytest.mark.django_db(transaction=True)


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
    assert f"job {job.pk} attempt 1 ({jobs.sleepy.name}, queue default) was cut off by shutdown" in output
    assert "; ready again in 7.000s" in output

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
    assert "second signal SIGTERM: exiting at once; 1 running jobs are recovered after their lease" in output

    job.refresh_from_db()
    assert (job.status, job.attempts, job.errors) == (JobStatus.RUNNING, 1, [])
    assert owner_pid(job.lease_owner) == process.pid
    assert job.lease_expires_at is not None
