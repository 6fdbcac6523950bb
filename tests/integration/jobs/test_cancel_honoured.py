"""A cancel request outlives the attempt: a retry and a lease recovery honour it (issue 17, points 5, 6).

Whatever ends a running attempt whose cancel was requested - a retryable
failure written alone, in a batch or on the claim statement, a cancel that
commits while the retry waits for the row, or lease recovery after the worker
hung - the job ends as a "cancelled" dead letter and never starts again.
"""

from __future__ import annotations

import logging
import signal
import threading
import time

import pytest
from django.db import connection, transaction

from django_jobretry import RetryableError, RetryPolicy, current_job, job
from django_jobretry.jobs import claim, recovery
from django_jobretry.jobs.claimed import ClaimedJob, Failed, release, succeed
from django_jobretry.jobs.record import Recorder
from django_jobretry.jobs.recovery import cancel_jobs
from django_jobretry.models import DeadLetter, Job
from tests.attempts import OWNER, claim_one, record_failure
from tests.inprocess import DEADLINE, run_burst
from tests.jobs_app import jobs
from tests.processes import Workers, finish, lease_expired, owner_pid, runs, spawn, wait_until

HISTORY = 10
EVENTS: list[str] = []


@job(
    name="tests.cancel_honoured.fails_once_cancelled",
    policy=RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.01, jitter=0),
)
def fails_once_cancelled() -> None:
    """Attempt 1 waits until an operator asked to cancel it, then fails retryably; later ones return."""
    context = current_job()
    attempt = context.attempt if context else 0
    EVENTS.append(f"attempt {attempt} started")
    if attempt != 1 or context is None:
        return
    give_up = time.monotonic() + DEADLINE
    asked = Job.objects.filter(pk=context.job_id).exclude(cancel_requested_at=None)
    while not asked.exists() and time.monotonic() < give_up:
        time.sleep(0.02)
    raise RetryableError("upstream down")


def assert_cancelled(job_id: int, *, ended: str, attempts: int = 1) -> DeadLetter:
    """The job is a "cancelled" dead letter whose last entry is how its attempt really ended."""
    assert not Job.objects.filter(pk=job_id).exists()
    dead = DeadLetter.objects.get(job_id=job_id)
    assert (dead.reason, dead.attempts, dead.last_error) == ("cancelled", attempts, "cancelled by ops")
    assert [(e["attempt"], e["ended"]) for e in dead.errors] == [(attempts, ended)]
    assert "delay" not in dead.errors[-1]  # no retry is coming
    return dead


def cancelled_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[object, object, object]]:
    return [
        (getattr(r, "job_id", None), getattr(r, "attempt", None), getattr(r, "actor", None))
        for r in caplog.records
        if getattr(r, "outcome", None) == "cancelled"
    ]


@pytest.mark.django_db
class TestTheRetryHonoursTheRequest:
    def test_a_failure_written_alone(self, caplog: pytest.LogCaptureFixture) -> None:
        jobs.always_fails.enqueue("a")
        claimed = claim_one()
        assert cancel_jobs([claimed.id], actor="ops").stopping == [claimed.id]
        with caplog.at_level(logging.INFO, "django_jobretry"):
            record_failure(claimed, ConnectionResetError("reset"))
        dead = assert_cancelled(claimed.id, ended="error")
        assert dead.errors[-1]["error_class"] == "builtins.ConnectionResetError"
        assert cancelled_lines(caplog) == [(claimed.id, 1, "ops")]
        assert claim.claim(OWNER, 10, 30, None) == []

    def test_a_failure_written_on_the_claim_statement(self) -> None:
        jobs.always_fails.enqueue("a")
        jobs.record.enqueue("next")
        claimed = claim_one()  # the first enqueued
        cancel_jobs([claimed.id], actor="ops")
        recorder = Recorder(OWNER, object)
        retries = [recorder.failed(Failed(claimed, ConnectionResetError("reset")))]
        assert retries[0].retry is not None
        taken = recorder.record_successes_and_claim(
            [], retries=retries, limit=10, lease_seconds=30, queues=None
        )
        assert [job.args for job in taken] == [["next"]]
        assert_cancelled(claimed.id, ended="error")

    def test_a_stale_failure_is_still_only_stale(self) -> None:
        jobs.always_fails.enqueue("a")
        claimed = claim_one()
        cancel_jobs([claimed.id], actor="ops")
        assert succeed([claimed]) == {claimed.id}  # the run ended first
        record_failure(claimed, ConnectionResetError("late"))  # an earlier handler's late failure
        assert not DeadLetter.objects.exists()
        assert Job.objects.get().status == "succeeded"


@pytest.mark.django_db(transaction=True)
def test_a_cancel_committed_while_the_retry_waits_for_the_row_is_honoured() -> None:
    """Real connections: the cancel holds the row; the retry blocks on it; the cancel commits first."""
    jobs.always_fails.enqueue("a")
    claimed = claim_one()
    asked, commit, failures = threading.Event(), threading.Event(), []

    def cancel_and_hold() -> None:
        try:
            with transaction.atomic():
                cancel_jobs([claimed.id], actor="ops")
                asked.set()
                commit.wait(DEADLINE)
        finally:
            connection.close()

    def fail() -> None:
        try:
            record_failure(claimed, ConnectionResetError("reset"))
        except Exception as exc:  # reported by the main thread
            failures.append(exc)
        finally:
            connection.close()

    canceller = threading.Thread(target=cancel_and_hold, daemon=True)
    canceller.start()
    assert asked.wait(DEADLINE)
    writer = threading.Thread(target=fail, daemon=True)
    writer.start()
    try:
        wait_until(lambda: blocked_on_a_lock() == 1, timeout=DEADLINE, what="the retry to wait for the row")
    finally:
        commit.set()
    canceller.join(DEADLINE)
    writer.join(DEADLINE)
    assert (failures, canceller.is_alive(), writer.is_alive()) == ([], False, False)
    assert_cancelled(claimed.id, ended="error")


def blocked_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("keep_signal_handlers")
def test_a_worker_never_runs_a_job_again_that_failed_after_its_cancel() -> None:
    """The handler fails once the cancel is requested, before a heartbeat (every 10 s) could see it."""
    EVENTS.clear()
    enqueued = fails_once_cancelled.enqueue()
    canceller = threading.Thread(target=cancel_when_running, args=(enqueued.pk,), daemon=True)
    canceller.start()
    run_burst(concurrency=1, lease_seconds=30)
    canceller.join(DEADLINE)
    assert_cancelled(enqueued.pk, ended="error")
    assert EVENTS == ["attempt 1 started"]


def cancel_when_running(job_id: int) -> None:
    try:
        wait_until(lambda: "attempt 1 started" in EVENTS, timeout=DEADLINE, what="attempt 1")
        cancel_jobs([job_id], actor="ops")
    finally:
        connection.close()


@pytest.mark.django_db
class TestRecoveryHonoursTheRequest:
    def test_an_expired_lease_with_attempts_left_ends_cancelled(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        jobs.always_fails.enqueue("a")  # three attempts: recovery alone would retry it
        claimed = claim_one(lease=0.05)
        cancel_jobs([claimed.id], actor="ops")
        wait_until(lambda: lease_expired(claimed.id), timeout=DEADLINE, what="the lease to expire (db clock)")
        [item] = recovery.recover_expired(100, HISTORY)
        assert (item.id, item.attempt, item.buried, item.reason, item.cancelled_by) == (
            claimed.id,
            1,
            True,
            "cancelled",
            "ops",
        )
        with caplog.at_level(logging.INFO, "django_jobretry"):
            recovery.announce(item, object)
        dead = assert_cancelled(claimed.id, ended="lease_expired")
        assert item.dead_letter_id == dead.pk
        assert cancelled_lines(caplog) == [(claimed.id, 1, "ops")]

    def test_an_expired_lease_without_a_request_is_retried_as_before(self) -> None:
        jobs.always_fails.enqueue("a")
        claimed: ClaimedJob = claim_one(lease=0.05)
        wait_until(lambda: lease_expired(claimed.id), timeout=DEADLINE, what="the lease to expire (db clock)")
        [item] = recovery.recover_expired(100, HISTORY)
        assert (item.buried, item.cancelled_by, Job.objects.get().status) == (False, "", "ready")


@pytest.mark.django_db(transaction=True)
def test_a_job_cancelled_on_a_hung_worker_is_not_run_by_another(workers: Workers) -> None:
    """Worker A hangs (SIGSTOP) mid-job; the cancel is requested; worker B recovers the lease."""
    enqueued = jobs.sleepy.enqueue("hung", 6)
    hung = spawn(workers, "--lease", "2", "--max-jobs", "1", "--concurrency", "1")
    wait_until(lambda: runs("hung") == 1, timeout=60, what="the job to start on worker A")
    row = Job.objects.get(pk=enqueued.pk)
    assert owner_pid(row.lease_owner) == hung.pid
    hung.send_signal(signal.SIGSTOP)
    try:
        assert cancel_jobs([enqueued.pk], actor="ops").stopping == [enqueued.pk]
        other = spawn(workers, "--lease", "2", "--concurrency", "1")
        wait_until(
            lambda: DeadLetter.objects.filter(job_id=enqueued.pk).exists(),
            timeout=60,
            what="worker B to recover the lease as a cancelled dead letter",
        )
    finally:
        hung.send_signal(signal.SIGCONT)
    assert_cancelled(enqueued.pk, ended="lease_expired")
    other.send_signal(signal.SIGTERM)
    code, output = finish(other, timeout=60)
    assert code == 0, output
    assert "cancelled by ops, not retried" in output
    code, output = finish(hung, timeout=60)  # its late outcome is stale: it changes nothing
    assert code == 0, output
    assert runs("hung") == 1
    assert_cancelled(enqueued.pk, ended="lease_expired")


@pytest.mark.django_db
def test_a_claimed_job_released_unstarted_after_its_cancel_is_never_ready_again() -> None:
    """A shutdown gives back what never started; not what an operator cancelled meanwhile."""
    jobs.record.enqueue("a")
    claimed = claim_one(lease=0.05)
    cancel_jobs([claimed.id], actor="ops")
    assert release([claimed]) == set()
    assert claim.claim(OWNER, 10, 30, None) == []
    wait_until(lambda: lease_expired(claimed.id), timeout=DEADLINE, what="the lease to expire (db clock)")
    [item] = recovery.recover_expired(100, HISTORY)
    assert (item.id, item.reason) == (claimed.id, "cancelled")
    assert_cancelled(claimed.id, ended="lease_expired")
