"""An idle worker claims its own short retries when they come due, not at its next poll.

Nothing notifies a retry: the job is written back with a later run_at. A
worker polling every minute would leave a retry after 10 ms waiting for
that minute; the Recorder remembers when the retries it scheduled come due
and the loop claims then (jobs/claim.py, ClaimSchedule).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections

from django_jobretry.jobs.claim import ClaimSchedule
from django_jobretry.models import Job, JobStatus
from django_jobretry.worker import Worker, WorkerOptions
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("keep_signal_handlers")]

#: The longest poll allowed, far longer than the test may take: a claim that waits for it fails the test.
POLL_SECONDS = 300.0
#: Seconds the worker may run before the watchdog stops it.
DEADLINE = 20.0


@pytest.fixture
def slow_poll(settings: Any) -> None:
    settings.JOBRETRY = {**settings.JOBRETRY, "POLL_SECONDS": POLL_SECONDS}


def run_until_succeeded(job_id: int) -> None:
    """Run a worker (no LISTEN, lease recovery off) until ``job_id`` succeeded or DEADLINE passed."""
    worker = Worker(WorkerOptions(listen=False, recover_every=3600, concurrency=1))
    done = threading.Event()

    def watch() -> None:
        try:
            for _ in range(int(DEADLINE / 0.05)):
                if Job.objects.filter(pk=job_id, status=JobStatus.SUCCEEDED).exists() or done.wait(0.05):
                    break
        finally:
            connections.close_all()
            worker.stop()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        assert worker.run() == 0
    finally:
        done.set()
        watcher.join(timeout=DEADLINE)


@pytest.mark.usefixtures("slow_poll")
def test_a_retry_ten_milliseconds_later_runs_before_the_next_poll() -> None:
    job = jobs.flaky.enqueue("k", 2)  # policy "three": retries after 10 and 20 ms
    run_until_succeeded(job.pk)
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts) == (JobStatus.SUCCEEDED, 3)
    assert Execution.objects.filter(key="k").count() == 3


def test_the_schedule_forgets_only_the_retries_already_due() -> None:
    due = [5.0, 7.0, 12.0]
    schedule = ClaimSchedule(poll_seconds=100.0, retries_due=due)
    assert schedule.next_at() == 0.0  # the first claim is at once
    schedule.claimed(started=1.0)
    assert schedule.next_at() == 5.0
    assert not schedule.due(4.9)
    assert schedule.due(5.0)
    schedule.claimed(started=7.0)
    assert (due, schedule.next_at()) == ([12.0], 12.0)
    schedule.claimed(started=50.0)
    assert (due, schedule.next_at()) == ([], 150.0)
