"""``async def`` jobs on the worker's event loop, in real worker processes (docs/async.md).

The jobs (tests/jobs_app/async_jobs.py) write their start and end to the
LedgerRun table, so how many ran at once is read back from the database.
"""

from __future__ import annotations

import re
import signal
from typing import Any

import pytest

from django_jobretry.decorators import JobDefinition
from django_jobretry.jobs.recovery import cancel_jobs
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.jobs_app import async_jobs
from tests.jobs_app.async_jobs import max_in_flight
from tests.jobs_app.models import Execution, LedgerRun
from tests.processes import Workers, finish, spawn, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_thousand_coroutines_run_hundreds_at_once_on_one_worker_process(workers: Workers) -> None:
    assert peak_of_a_burst(workers, async_jobs.awaits, "many", count=1000, seconds=1.0) == 500


def test_the_control_sync_jobs_run_no_more_than_the_threads(workers: Workers) -> None:
    assert 2 <= peak_of_a_burst(workers, async_jobs.sleeps, "control", count=40, seconds=0.2) <= 10


def peak_of_a_burst(
    workers: Workers, task: JobDefinition[Any], key: str, *, count: int, seconds: float
) -> int:
    """Run ``count`` jobs of ``task`` on one burst worker (10 threads, 500 coroutines); the most at once."""
    task.bulk_enqueue([((key, seconds), {})] * count)
    worker = spawn(workers, "--burst", "--concurrency", "10", "--async-concurrency", "500")
    code, output = finish(worker, timeout=120)
    assert code == 0, output
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == count
    assert list(LedgerRun.objects.filter(key=key).values_list("pid", flat=True).distinct()) == [worker.pid]
    return max_in_flight(key)


def test_a_coroutine_past_its_time_limit_is_cancelled_and_retried(workers: Workers) -> None:
    job = async_jobs.hangs_on_first_attempt.enqueue("late")
    code, output = finish(spawn(workers, "--burst"), timeout=90)
    assert code == 0, output
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.SUCCEEDED, 2)
    assert [(entry["attempt"], entry["ended"]) for entry in job.errors] == [(1, "timeout")]
    # Cancelled, not merely abandoned: attempt 1's coroutine saw CancelledError at its await.
    assert marks("late") == [("late:started", 1), ("late:cancelled", 1)]


def test_an_operator_cancel_stops_a_coroutine_mid_await(workers: Workers) -> None:
    job = async_jobs.awaits_until_cancelled.enqueue("stop-me")
    process = spawn(workers, "--concurrency", "1")
    wait_until(
        lambda: marks("stop-me") == [("stop-me:started", 1)], timeout=60, what="the coroutine to start"
    )
    cancel_jobs([job.pk], actor="ops")
    wait_until(lambda: len(marks("stop-me")) == 2, timeout=60, what="the coroutine to see its cancel")
    assert marks("stop-me")[-1] == ("stop-me:cancelled", 1)
    dead = DeadLetter.objects.get(job_id=job.pk)
    assert (dead.reason, dead.last_error) == ("cancelled", "cancelled by ops")
    process.send_signal(signal.SIGTERM)
    code, output = finish(process, timeout=30)
    assert code == 0, output


def test_sigterm_lets_coroutines_in_flight_finish_and_gives_back_those_waiting(workers: Workers) -> None:
    enqueued = async_jobs.marks_and_awaits.bulk_enqueue([(("drain", 2.0), {})] * 6)
    process = spawn(workers, "--async-concurrency", "2", "--shutdown-timeout", "30")
    started = Execution.objects.filter(key="drain:started")
    wait_until(lambda: started.count() == 2, timeout=60, what="two coroutines to start")
    process.send_signal(signal.SIGTERM)
    code, output = finish(process, timeout=60)
    assert code == 0, output
    assert started.count() == 2, "no coroutine started after the signal"
    rows = Job.objects.filter(pk__in=[job.pk for job in enqueued])
    assert (
        sorted(rows.values_list("status", "attempts"))
        == [(JobStatus.READY, 0)] * 4 + [(JobStatus.SUCCEEDED, 1)] * 2
    )
    assert LedgerRun.objects.filter(key="drain").count() == 2


def test_past_the_grace_a_coroutine_is_cancelled_and_its_job_ready_at_once(workers: Workers) -> None:
    job = async_jobs.awaits_until_cancelled.enqueue("cut")
    process = spawn(workers, "--shutdown-timeout", "0.5", "--lease", "60")
    wait_until(lambda: marks("cut") == [("cut:started", 1)], timeout=60, what="the coroutine to start")
    process.send_signal(signal.SIGTERM)
    code, output = finish(process, timeout=30)
    assert code == 0, output
    job.refresh_from_db()
    assert (job.status, job.attempts, job.lease_token) == (JobStatus.READY, 1, None)
    assert [(entry["attempt"], entry["ended"], entry["delay"]) for entry in job.errors] == [
        (1, "shutdown", 0)
    ]
    assert marks("cut") == [("cut:started", 1), ("cut:cancelled", 1)]


def test_a_coroutine_that_blocks_the_loop_is_named_and_the_others_complete(workers: Workers) -> None:
    blocker = async_jobs.blocks_the_loop.enqueue("blocker", 2.0)
    async_jobs.awaits.bulk_enqueue([(("others", 0.1), {})] * 20)
    code, output = finish(spawn(workers, "--burst"), timeout=90)
    assert code == 0, output
    assert f"job {blocker.pk} attempt 1 blocked the event loop for 0.5 s and still does" in output
    assert re.search(rf"job {blocker.pk} attempt 1 blocked the event loop for \d+\.\d s:", output), output
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == 21
    assert LedgerRun.objects.filter(key="others").count() == 20


def test_a_limited_coroutine_keeps_its_limit_and_a_snoozing_one_gives_its_attempt_back(
    workers: Workers,
) -> None:
    async_jobs.three_at_once.bulk_enqueue([(("limited", 0.3), {})] * 12)
    snoozer = async_jobs.snoozes_once.enqueue("snoozer")
    code, output = finish(spawn(workers, "--max-jobs", "14"), timeout=90)
    assert code == 0, output
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == 13
    assert 2 <= max_in_flight("limited") <= 3  # the limit, across the loop's room of 100
    snoozer.refresh_from_db()
    assert (snoozer.status, snoozer.attempts, snoozer.snoozes) == (JobStatus.SUCCEEDED, 1, 1)
    assert list(Execution.objects.filter(key="snoozer").values_list("attempt", flat=True)) == [1, 1]


def marks(key: str) -> list[tuple[str, int]]:
    """The ``KEY:started`` / ``KEY:cancelled`` rows the coroutine wrote, in order, with their attempt."""
    return list(
        Execution.objects.filter(key__startswith=f"{key}:").order_by("id").values_list("key", "attempt")
    )
