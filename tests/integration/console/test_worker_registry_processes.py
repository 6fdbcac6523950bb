"""Real `manage.py runworker` processes in the workers table: what they say, and that they leave.

A SIGKILLed worker shown as lost is the scenario in tests/features/operators.feature;
the table's rules (lost, kept, removed) are tested in test_workers_table.py.
Every wait is a database condition with a hard deadline.
"""

from __future__ import annotations

import signal
import socket

import pytest

from django_jobretry.console.workers import package_version
from django_jobretry.models import Job, JobStatus, WorkerProcess
from tests.jobs_app import jobs
from tests.processes import Workers, finish, runs, spawn, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def registered(pid: int) -> bool:
    return WorkerProcess.objects.filter(pid=pid).exists()


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_worker_says_what_it_runs_and_leaves_on_a_clean_exit(workers: Workers, pool: str) -> None:
    process = spawn(
        workers, "--queue", "default", "--queue", "mail", "--concurrency", "2", "--lease", "3", "--pool", pool
    )
    wait_until(lambda: registered(process.pid), timeout=60, what="the worker to register")
    row = WorkerProcess.objects.live().get()
    assert (row.host, row.pid, row.queues, row.concurrency, row.pool, row.version) == (
        socket.gethostname(),
        process.pid,
        ["default", "mail"],
        2,
        pool,
        package_version(),
    )
    assert row.lease.total_seconds() == 3
    assert row.running_jobs == 0
    assert row.worker_id.startswith(f"{row.host}:{process.pid}:")

    job = jobs.sleepy.enqueue("held", 2)
    wait_until(lambda: runs("held") == 1, timeout=60, what="the worker to start the job")
    assert Job.objects.get(pk=job.pk).lease_owner == row.worker_id  # the same id as the lease owner
    # The count of running jobs comes with the next heartbeat (every second with this lease).
    wait_until(
        lambda: WorkerProcess.objects.filter(pid=process.pid, running_jobs=1).exists(),
        timeout=30,
        what="a heartbeat that reports the running job",
    )

    process.send_signal(signal.SIGTERM)
    code, output = finish(process, timeout=60)
    assert code == 0, output
    assert Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED  # drained, then gone
    assert not WorkerProcess.objects.exists(), "a clean exit removes the worker's row"


def test_a_burst_worker_leaves_no_row(workers: Workers) -> None:
    jobs.record.enqueue("once")
    process = spawn(workers, "--burst")
    code, output = finish(process, timeout=60)
    assert code == 0, output
    assert runs("once") == 1
    assert not WorkerProcess.objects.exists()
