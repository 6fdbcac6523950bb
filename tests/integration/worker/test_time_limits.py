"""Per-job time limits in the thread pool: the attempt ends as "timeout", the slot stays taken.

Threads cannot be killed, so the limit is reported, not enforced: the
attempt is recorded as a retryable ``timeout`` failure, and the handler's
thread keeps its worker slot until it returns, when what it returns is
dropped. The engine runs in this process (tests/inprocess.py).
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection

from django_jobretry import RetryPolicy, job
from django_jobretry.exceptions import InvalidJob
from django_jobretry.models import DeadLetter, DeadReason, Job, JobStatus
from django_jobretry.registry import time_limit
from tests.inprocess import DEADLINE, run_until_settled
from tests.jobs_app import jobs

#: Two quick attempts, no jitter.
QUICK = RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.01, jitter=0)
#: What the slow handler did, in order, across its runs.
EVENTS: list[str] = []
RELEASE = threading.Event()


@job(name="tests.time_limits.slow_first_time", policy=QUICK, timeout=0.2)
def slow_first_time() -> None:
    from django_jobretry import current_job

    context = current_job()
    attempt = context.attempt if context else 0
    EVENTS.append(f"attempt {attempt} started")
    if attempt == 1:
        RELEASE.wait(DEADLINE)
        EVENTS.append("attempt 1 returned")


@job(name="tests.time_limits.limited_by_job", policy=QUICK, timeout=timedelta(seconds=5))
def limited_by_job() -> None:
    """Only its time limit matters here."""


def timeout_recorded(job_id: int, attempt: int) -> bool:
    """Whether attempt ``attempt`` of the job is recorded as timed out, on the job or its dead letter."""
    histories = [
        *Job.objects.filter(pk=job_id).values_list("errors", flat=True),
        *DeadLetter.objects.filter(job_id=job_id).values_list("errors", flat=True),
    ]
    return any(e["attempt"] == attempt and e["ended"] == "timeout" for errors in histories for e in errors)


@job(
    name="tests.time_limits.limited_by_policy",
    policy=RetryPolicy(max_attempts=2, base_delay=0.01, jitter=0, timeout=0.2),
)
def limited_by_policy() -> None:
    """No timeout of its own: the limit is its policy's. Each attempt runs until it is timed out.

    It waits for that, not for a fixed time: a handler that slept 0.6 s was recorded as a
    success whenever a loaded worker's main loop looked at its deadline 0.4 s late.
    """
    from django_jobretry import current_job

    context = current_job()
    assert context is not None
    give_up = time.monotonic() + DEADLINE
    while time.monotonic() < give_up and not timeout_recorded(context.job_id, context.attempt):
        time.sleep(0.02)


#: Attempt 1 of ``lingers`` returns once attempt 2 has (a hard deadline bounds the wait).
SECOND_RETURNED = threading.Event()
#: Seconds attempt 2 of ``lingers`` waits to see itself timed out: an acceptance deadline.
SEEN_TIMED_OUT_WITHIN = 10


@job(name="tests.time_limits.lingers", policy=QUICK, timeout=0.2)
def lingers() -> None:
    """Attempt 1 outlives attempt 2; attempt 2 runs until its own timeout is recorded, or gives up."""
    from django_jobretry import current_job

    context = current_job()
    assert context is not None
    EVENTS.append(f"attempt {context.attempt} started")
    if context.attempt == 1:
        SECOND_RETURNED.wait(DEADLINE)
        EVENTS.append("attempt 1 returned")
        return
    give_up = time.monotonic() + SEEN_TIMED_OUT_WITHIN
    while time.monotonic() < give_up and not DeadLetter.objects.filter(job_id=context.job_id).exists():
        time.sleep(0.02)
    EVENTS.append("attempt 2 returned")
    SECOND_RETURNED.set()


def release_once_timed_out(job_id: int) -> threading.Thread:
    """Lets the slow handler return once its timeout is recorded (a hard deadline bounds the wait)."""

    def wait_then_release() -> None:
        give_up = time.monotonic() + DEADLINE
        try:
            while time.monotonic() < give_up:
                if timeout_recorded(job_id, 1):
                    EVENTS.append("timeout recorded")
                    return
                time.sleep(0.02)
        finally:
            RELEASE.set()
            connection.close()  # this thread's own session; the test database is dropped at the end

    thread = threading.Thread(target=wait_then_release, daemon=True)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("keep_signal_handlers")
def test_a_handler_past_its_timeout_is_cut_off_and_its_slot_held_until_it_returns() -> None:
    EVENTS.clear()
    RELEASE.clear()
    enqueued = slow_first_time.enqueue()
    watcher = release_once_timed_out(enqueued.pk)
    # Attempt 2 is due 10 ms after the timeout; a burst that sees nothing due yet ends
    # (tests/inprocess.py), so burst until the job is settled.
    run_until_settled(concurrency=1)
    watcher.join(DEADLINE)
    row = Job.objects.get(pk=enqueued.pk)
    assert (row.status, row.attempts) == (JobStatus.SUCCEEDED, 2)
    [entry] = row.errors
    assert (entry["ended"], entry["kind"], entry["error_class"]) == (
        "timeout",
        "retryable",
        "django_jobretry.exceptions.JobTimeout",
    )
    assert "ran longer than its timeout of 0:00:00.200000" in entry["message"]
    # With one slot, attempt 2 could only start once the abandoned attempt 1 returned.
    assert EVENTS == ["attempt 1 started", "timeout recorded", "attempt 1 returned", "attempt 2 started"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("keep_signal_handlers")
def test_a_retry_is_timed_out_while_its_abandoned_earlier_attempt_still_runs() -> None:
    """The abandoned attempt 1 neither shields attempt 2 from its limit nor clears its deadline."""
    EVENTS.clear()
    SECOND_RETURNED.clear()
    enqueued = lingers.enqueue()
    try:
        run_until_settled(concurrency=2)
    finally:
        SECOND_RETURNED.set()
    assert not Job.objects.filter(pk=enqueued.pk).exists()
    dead = DeadLetter.objects.get(job_id=enqueued.pk)
    assert (dead.reason, dead.attempts) == (DeadReason.EXHAUSTED, 2)
    assert [(entry["attempt"], entry["ended"]) for entry in dead.errors] == [(1, "timeout"), (2, "timeout")]
    # Attempt 2 ran beside the lingering attempt 1, and both outcomes came too late to count.
    assert EVENTS == ["attempt 1 started", "attempt 2 started", "attempt 2 returned", "attempt 1 returned"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("keep_signal_handlers")
def test_a_policy_timeout_alone_cuts_off_the_attempt() -> None:
    enqueued = limited_by_policy.enqueue()
    assert time_limit(enqueued.task_name, enqueued.policy_name) == timedelta(seconds=0.2)
    run_until_settled(concurrency=1)
    assert not Job.objects.filter(pk=enqueued.pk).exists()
    dead = DeadLetter.objects.get(job_id=enqueued.pk)
    assert (dead.reason, dead.attempts) == (DeadReason.EXHAUSTED, 2)
    assert [(entry["ended"], entry["error_class"]) for entry in dead.errors] == [
        ("timeout", "django_jobretry.exceptions.JobTimeout")
    ] * 2
    assert "ran longer than its timeout of 0:00:00.200000" in dead.last_error


@pytest.mark.django_db
def test_the_jobs_own_timeout_wins_over_its_policys() -> None:
    assert time_limit(limited_by_job.name, "default") == timedelta(seconds=5)
    assert time_limit(jobs.record.name, "three") is None


@pytest.mark.parametrize("bad", [0, -1, "soon", float("nan"), timedelta(days=400)])
def test_a_bad_timeout_is_refused_at_declaration(bad: object) -> None:
    with pytest.raises(InvalidJob, match=r"timeout .* is invalid"):
        job(name="tests.time_limits.never", timeout=bad)(lambda: None)  # type: ignore[call-overload]


def test_a_policy_timeout_is_validated_and_part_of_the_policy() -> None:
    assert RetryPolicy(timeout=30).timeout == timedelta(seconds=30)
    assert RetryPolicy(timeout=30) != RetryPolicy()
    with pytest.raises(ValueError, match="timeout"):
        RetryPolicy(timeout=0)
