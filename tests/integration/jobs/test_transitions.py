"""Worker transitions called directly: fencing, release, heartbeat, recovery, history.

These run in-process on one connection; the same transitions under real
processes, kills and pauses are in test_worker_processes.py.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.db.models import DurationField, Value
from django.db.models.functions import Now

from django_jobretry import signals
from django_jobretry.exceptions import UnknownTask
from django_jobretry.jobs import claim, recovery
from django_jobretry.jobs.claimed import Failed, heartbeat, release, succeed
from django_jobretry.jobs.record import Recorder
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.worker.runner import Runner
from tests.attempts import OWNER, claim_one, fail_attempt, record_failure
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db


def make_due() -> None:
    """Skip a retry's backoff: make every ready job due now."""
    Job.objects.filter(status=JobStatus.READY).update(run_at=Now())


def expire_leases() -> None:
    past = Now() - Value(timedelta(seconds=1), output_field=DurationField())
    Job.objects.filter(status=JobStatus.RUNNING).update(lease_expires_at=past)


class TestClaim:
    def test_claim_counts_the_attempt_and_takes_a_lease(self) -> None:
        enqueued = jobs.record.enqueue("a")
        claimed = claim_one()
        row = Job.objects.get(pk=enqueued.pk)
        assert (claimed.id, claimed.attempt, claimed.args) == (enqueued.pk, 1, ["a"])
        assert (row.status, row.attempts, row.lease_owner, row.lease_token) == (
            JobStatus.RUNNING,
            1,
            OWNER,
            claimed.token,
        )
        assert row.first_attempt_at == row.started_at
        assert row.lease_expires_at > row.started_at

    def test_claim_order_is_priority_then_run_at_then_id(self) -> None:
        low = jobs.record.using(priority=-5).enqueue("low")
        first = jobs.record.enqueue("first")
        second = jobs.record.enqueue("second")
        high = jobs.record.using(priority=10).enqueue("high")
        claimed = claim.claim(OWNER, 10, 30, None)
        assert [c.id for c in claimed] == [high.pk, first.pk, second.pk, low.pk]

    def test_future_jobs_and_other_queues_are_not_claimed(self) -> None:
        jobs.record.using(run_after=timedelta(hours=1)).enqueue("later")
        jobs.other_queue.enqueue("elsewhere")
        assert claim.claim(OWNER, 10, 30, ["default"]) == []
        assert [c.queue_name for c in claim.claim(OWNER, 10, 30, ["other"])] == ["other"]

    def test_a_claimed_job_is_not_claimed_again(self) -> None:
        jobs.record.enqueue("a")
        claim_one()
        assert claim.claim(OWNER, 10, 30, None) == []


class TestFencing:
    def test_success_with_a_stale_token_changes_nothing(self) -> None:
        jobs.record.enqueue("a")
        claimed = claim_one()
        assert succeed([replace(claimed, token=uuid.uuid4())]) == set()
        assert succeed([replace(claimed, attempt=2)]) == set()
        assert Job.objects.get(pk=claimed.id).status == JobStatus.RUNNING
        assert succeed([claimed]) == {claimed.id}
        row = Job.objects.get(pk=claimed.id)
        assert (row.status, row.lease_token) == (JobStatus.SUCCEEDED, None)
        assert row.finished_at is not None

    def test_stale_failure_never_enters_the_retry_path(self, caplog: pytest.LogCaptureFixture) -> None:
        jobs.always_fails.enqueue("a")
        old = claim_one()
        expire_leases()
        recovery.recover_expired(10, 100)
        make_due()
        new = claim_one()
        assert new.attempt == 2
        caplog.set_level(logging.WARNING, "django_jobretry")
        record_failure(old, ConnectionResetError("late"))
        row = Job.objects.get(pk=new.id)
        assert (row.status, row.attempts, row.lease_token) == (JobStatus.RUNNING, 2, new.token)
        assert [e["ended"] for e in row.errors] == ["lease_expired"]
        assert "outcome ignored" in caplog.text

    def test_heartbeat_extends_only_held_leases(self) -> None:
        jobs.record.enqueue("a")
        claimed = claim_one()
        before = Job.objects.get(pk=claimed.id).lease_expires_at
        assert heartbeat([claimed], 600) == {claimed.id: ""}
        assert Job.objects.get(pk=claimed.id).lease_expires_at > before
        assert heartbeat([replace(claimed, token=uuid.uuid4())], 600) == {}


class TestRelease:
    def test_release_uncounts_the_attempt(self) -> None:
        jobs.record.enqueue("a")
        claimed = claim_one()
        assert release([claimed]) == {claimed.id}
        row = Job.objects.get(pk=claimed.id)
        assert (row.status, row.attempts, row.first_attempt_at, row.lease_token) == (
            JobStatus.READY,
            0,
            None,
            None,
        )


class TestRecovery:
    def test_expired_lease_is_retried_with_the_lost_attempt_counted(self) -> None:
        jobs.record.enqueue("a")
        claimed = claim_one()
        expire_leases()
        [recovered] = recovery.recover_expired(10, 100)
        assert (recovered.id, recovered.attempt, recovered.buried) == (claimed.id, 1, False)
        row = Job.objects.get(pk=claimed.id)
        assert (row.status, row.attempts) == (JobStatus.READY, 1)
        [entry] = row.errors
        assert (entry["ended"], entry["attempt"], entry["worker"]) == ("lease_expired", 1, OWNER)
        assert "at" in entry

    def test_the_retry_waits_for_the_policys_backoff(self) -> None:
        jobs.always_fails.using(policy="default").enqueue("a")  # 15 s doubling, 25 % jitter
        claimed = claim_one()
        expire_leases()
        [recovered] = recovery.recover_expired(10, 100)
        assert recovered.delay is not None
        assert timedelta(seconds=11.25) <= recovered.delay <= timedelta(seconds=18.75)
        row = Job.objects.get(pk=claimed.id)
        assert row.errors[0]["delay"] == pytest.approx(recovered.delay.total_seconds())
        waited = row.run_at - datetime.fromisoformat(row.errors[0]["at"])
        assert abs(waited - recovered.delay) < timedelta(milliseconds=1)
        assert claim.claim(OWNER, 10, 30, None) == []  # not before its backoff

    def test_a_retry_for_deadline_buries_as_deadline(self) -> None:
        jobs.record.using(policy="emails").enqueue("a")  # retry_for 2 h
        claim_one()
        Job.objects.update(first_attempt_at=Now() - Value(timedelta(hours=2), output_field=DurationField()))
        expire_leases()
        [recovered] = recovery.recover_expired(10, 100)
        assert (recovered.buried, recovered.reason) == (True, "deadline")
        assert DeadLetter.objects.get().reason == "deadline"

    def test_live_leases_are_left_alone(self) -> None:
        jobs.record.enqueue("a")
        claim_one()
        assert recovery.recover_expired(10, 100) == []

    def test_last_attempt_lost_buries_the_job(self) -> None:
        enqueued = jobs.record.enqueue("a")
        for _ in range(3):
            make_due()
            claim_one()
            expire_leases()
            recovery.recover_expired(10, 100)
        assert not Job.objects.filter(pk=enqueued.pk).exists()
        dead = DeadLetter.objects.get(job_id=enqueued.pk)
        assert (dead.reason, dead.attempts, dead.args) == ("lease_expired", 3, ["a"])
        assert [e["ended"] for e in dead.errors] == ["lease_expired"] * 3
        assert dead.last_error.startswith("lease expired: worker test-worker")


class TestRecorder:
    def test_retryable_failure_is_a_durable_backoff(self) -> None:
        jobs.always_fails.enqueue("a")
        claimed = fail_attempt(ConnectionResetError("reset"))
        row = Job.objects.get(pk=claimed.id)
        assert (row.status, row.attempts, row.lease_token) == (JobStatus.READY, 1, None)
        assert row.run_at > row.started_at  # the policy's delay, on the database clock
        [entry] = row.errors
        assert entry["error_class"] == "builtins.ConnectionResetError"
        assert (entry["message"], entry["kind"], entry["ended"], entry["delay"]) == (
            "reset",
            "retryable",
            "error",
            0.01,
        )
        assert "ConnectionResetError: reset" in entry["traceback"]

    def test_fatal_failure_is_buried_at_once(self) -> None:
        from django_jobretry import FatalError

        enqueued = jobs.fatal.enqueue("a")
        fail_attempt(FatalError("bad payload"))
        dead = DeadLetter.objects.get(job_id=enqueued.pk)
        assert (dead.reason, dead.attempts, dead.last_error, dead.last_error_class) == (
            "fatal",
            1,
            "bad payload",
            "django_jobretry.exceptions.FatalError",
        )
        assert dead.errors[0]["ended"] == "fatal"
        assert dead.enqueued_at == enqueued.enqueued_at

    def test_requested_delay_is_honoured(self) -> None:
        from django_jobretry import RetryableError

        jobs.always_fails.enqueue("a")
        claimed = fail_attempt(RetryableError("429", delay=120))
        row = Job.objects.get(pk=claimed.id)
        assert row.errors[0]["delay"] == 120.0
        assert timedelta(seconds=119) < row.run_at - row.started_at < timedelta(seconds=125)

    def test_unknown_task_is_retryable_then_dead_with_that_reason(self) -> None:
        enqueued = jobs.record.enqueue("a")
        Job.objects.filter(pk=enqueued.pk).update(task_name="gone.from.this.deploy")
        runner = Runner(0, inbox=None, outbox=None, wake=None, sender=object)  # type: ignore[arg-type]
        for _ in range(3):
            claimed = claim_one()
            outcome = runner.execute(claimed)
            assert isinstance(outcome, Failed)
            assert isinstance(outcome.error, UnknownTask)
            Recorder(OWNER, object).record_failure(outcome)
            Job.objects.filter(pk=enqueued.pk).update(run_at=Now())
        dead = DeadLetter.objects.get(job_id=enqueued.pk)
        assert (dead.reason, dead.attempts) == ("exhausted", 3)
        assert dead.last_error.startswith("unknown task 'gone.from.this.deploy': not registered")
        assert [e["ended"] for e in dead.errors] == ["unknown_task"] * 3

    def test_recording_survives_hostile_errors(self, settings: Any) -> None:
        settings.JOBRETRY = {**settings.JOBRETRY, "ERROR_MESSAGE_CHARS": 100}

        class Unprintable(Exception):
            def __str__(self) -> str:
                raise RuntimeError("no")

            def __repr__(self) -> str:
                raise RuntimeError("no")

        jobs.always_fails.enqueue("a")
        claimed = fail_attempt(ValueError("nul\x00 and lone surrogate \udcff " + "x" * 10_000))
        [entry] = Job.objects.get(pk=claimed.id).errors
        assert "\x00" not in entry["message"]
        assert len(entry["message"]) == 100
        assert entry["message"].endswith("characters cut]")
        Job.objects.filter(pk=claimed.id).update(run_at=Now())
        claimed = fail_attempt(Unprintable())
        assert Job.objects.get(pk=claimed.id).errors[-1]["message"].endswith(".Unprintable>")

    def test_history_keeps_only_the_newest_entries(self, settings: Any) -> None:
        settings.JOBRETRY = {**settings.JOBRETRY, "ERROR_HISTORY_LIMIT": 2}
        enqueued = jobs.always_fails.using(policy="default").enqueue("a")
        for attempt in range(1, 5):
            fail_attempt(ConnectionResetError(f"attempt {attempt}"))
            Job.objects.filter(pk=enqueued.pk).update(run_at=Now())
        errors = Job.objects.get(pk=enqueued.pk).errors
        assert [e["message"] for e in errors] == ["attempt 3", "attempt 4"]

    def test_signals_and_logs_carry_ids_never_arguments(self, caplog: pytest.LogCaptureFixture) -> None:
        received: list[dict[str, Any]] = []

        def receiver(sender: Any, **kwargs: Any) -> None:
            received.append(kwargs)

        signals.job_retry_scheduled.connect(receiver)
        try:
            caplog.set_level(logging.INFO, "django_jobretry")
            jobs.always_fails.enqueue("secret-payload-123")
            claimed = fail_attempt(ConnectionResetError("reset"))
        finally:
            signals.job_retry_scheduled.disconnect(receiver)
        [sent] = received
        assert (sent["job_id"], sent["attempt"], sent["delay"]) == (claimed.id, 1, timedelta(seconds=0.01))
        [record] = [r for r in caplog.records if getattr(r, "outcome", None) == "retry_scheduled"]
        fields = (record.__dict__["job_id"], record.__dict__["attempt"], record.__dict__["task"])
        assert fields == (claimed.id, 1, "tests.jobs_app.jobs.always_fails")
        assert "secret-payload-123" not in caplog.text


class TestAutomaticRequeue:
    def test_budget_requeues_once_then_the_job_stays_dead(self) -> None:
        heard: list[tuple[str, dict[str, Any]]] = []

        def died(sender: Any, **kwargs: Any) -> None:
            heard.append(("dead_lettered", kwargs))

        def requeued(sender: Any, **kwargs: Any) -> None:
            heard.append(("requeued", kwargs))

        signals.job_dead_lettered.connect(died)
        signals.job_requeued.connect(requeued)
        try:
            enqueued = jobs.budgeted.enqueue("budget")
            fail_attempt(ConnectionResetError("down"))
        finally:
            signals.job_dead_lettered.disconnect(died)
            signals.job_requeued.disconnect(requeued)
        [revived] = Job.objects.filter(args=["budget"])
        # The death is announced after the requeue, saying the job lives on.
        assert [(name, kwargs["job_id"]) for name, kwargs in heard] == [
            ("requeued", revived.pk),
            ("dead_lettered", enqueued.pk),
        ]
        assert heard[1][1]["requeued_as"] == revived.pk
        assert (revived.requeue_count, revived.requeue_history[0]["by"]) == (1, "automatic (requeue_budget)")
        assert revived.run_at > revived.enqueued_at  # after max_delay, not at once
        assert not DeadLetter.objects.exists()
        Job.objects.filter(pk=revived.pk).update(run_at=Now())
        fail_attempt(ConnectionResetError("down"))
        dead = DeadLetter.objects.get()
        assert (dead.requeue_count, dead.job_id, dead.reason) == (1, revived.pk, "exhausted")
        assert not Job.objects.exists()
        assert enqueued.pk != revived.pk

    def test_fatal_deaths_are_not_requeued_automatically(self) -> None:
        from django_jobretry import FatalError

        jobs.budgeted.enqueue("fatal", fatal=True)
        fail_attempt(FatalError("bad payload"))
        assert DeadLetter.objects.get().reason == "fatal"
        assert not Job.objects.exists()

    def test_without_a_budget_nothing_is_requeued(self) -> None:
        jobs.always_fails.using(policy="default").enqueue("no-budget")
        Job.objects.update(max_attempts=1)
        fail_attempt(ConnectionResetError("down"))
        assert DeadLetter.objects.get().reason == "exhausted"
        assert not Job.objects.exists()


def test_a_row_that_could_never_run_cannot_be_stored() -> None:
    """attempts == max_attempts on a ready row would wait forever: the database refuses it."""
    enqueued = jobs.record.enqueue("impossible")
    with pytest.raises(IntegrityError, match="jobretry_job_ready_has_attempts_left"), transaction.atomic():
        Job.objects.filter(pk=enqueued.pk).update(attempts=3)
    assert Job.objects.get(pk=enqueued.pk).attempts == 0
    assert [c.id for c in claim.claim(OWNER, 10, 30, None)] == [enqueued.pk]
