"""Operator cancel: ready jobs die at once as "cancelled"; running ones are stopped by their worker."""

from __future__ import annotations

import io
import threading
import time
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.urls import reverse

from django_jobretry import RetryPolicy, current_job, deadletters, job
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.services import transitions
from django_jobretry.services.cancel import cancel_jobs
from tests.attempts import claim_one
from tests.inprocess import DEADLINE, run_burst
from tests.integration.conftest import Operator, messages_of
from tests.jobs_app import jobs
from tests.processes import Workers, finish, runs, spawn, wait_until

JOBS_CHANGELIST = "admin:django_jobretry_job_changelist"
EVENTS: list[str] = []
RELEASE = threading.Event()


@job(name="tests.cancel.waits", policy=RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.01, jitter=0))
def waits() -> None:
    context = current_job()
    EVENTS.append(f"attempt {context.attempt if context else 0} started")
    RELEASE.wait(DEADLINE)
    EVENTS.append("returned")


@pytest.mark.django_db
class TestService:
    def test_a_ready_job_becomes_a_cancelled_dead_letter_that_can_be_requeued(self) -> None:
        enqueued = jobs.record.enqueue("a")
        result = cancel_jobs([enqueued.pk], actor="ops")
        assert (list(result.dead_letters), result.stopping, result.not_live) == ([enqueued.pk], [], [])
        dead = DeadLetter.objects.get(job_id=enqueued.pk)
        assert (dead.reason, dead.attempts, dead.last_error) == ("cancelled", 0, "cancelled by ops")
        assert [(e["ended"], e["message"]) for e in dead.errors] == [("cancelled", "cancelled by ops")]
        assert not Job.objects.exists()
        revived = deadletters.requeue(dead.pk, actor="ops")
        assert (revived.status, revived.requeue_history[0]["reason"]) == (JobStatus.READY, "cancelled")

    def test_a_running_job_is_only_asked_to_stop(self) -> None:
        enqueued = jobs.record.enqueue("a")
        claimed = claim_one()
        result = cancel_jobs([enqueued.pk], actor="ops")
        assert (result.dead_letters, result.stopping) == ({}, [enqueued.pk])
        row = Job.objects.get()
        assert (row.status, row.cancel_requested_by, row.lease_token) == (
            JobStatus.RUNNING,
            "ops",
            claimed.token,
        )
        assert row.cancel_requested_at is not None

    def test_a_run_that_ends_before_its_worker_sees_the_request_ends_normally(self) -> None:
        jobs.record.enqueue("a")
        claimed = claim_one()
        cancel_jobs([claimed.id], actor="ops")
        assert transitions.succeed([claimed]) == {claimed.id}
        row = Job.objects.get()
        assert (row.status, row.cancel_requested_by, row.cancel_requested_at) == (
            JobStatus.SUCCEEDED,
            "",
            None,
        )

    def test_finished_dead_and_unknown_jobs_are_reported_and_untouched(self) -> None:
        done = jobs.record.enqueue("done")
        Job.objects.filter(pk=done.pk).update(status=JobStatus.SUCCEEDED, finished_at=done.enqueued_at)
        result = cancel_jobs([done.pk, 999_999], actor="ops")
        assert (result.dead_letters, result.stopping, result.not_live) == ({}, [], [done.pk, 999_999])
        assert Job.objects.get().status == JobStatus.SUCCEEDED


def cancel_once_running(job_id: int) -> threading.Thread:
    """Cancels ``job_id`` once its handler runs, then lets the handler return once it is buried."""

    def act() -> None:
        give_up = time.monotonic() + DEADLINE
        try:
            while "attempt 1 started" not in EVENTS and time.monotonic() < give_up:
                time.sleep(0.02)
            cancel_jobs([job_id], actor="ops")
            while not DeadLetter.objects.filter(job_id=job_id).exists() and time.monotonic() < give_up:
                time.sleep(0.02)
            EVENTS.append("buried")
        finally:
            RELEASE.set()
            connection.close()

    thread = threading.Thread(target=act, daemon=True)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("keep_signal_handlers")
def test_the_worker_stops_a_cancelled_running_job_at_its_next_heartbeat() -> None:
    EVENTS.clear()
    RELEASE.clear()
    enqueued = waits.enqueue()
    canceller = cancel_once_running(enqueued.pk)
    run_burst(concurrency=1, lease_seconds=1.5)  # a heartbeat every 0.5 s
    canceller.join(DEADLINE)
    dead = DeadLetter.objects.get(job_id=enqueued.pk)
    assert (dead.reason, dead.attempts, dead.last_error) == ("cancelled", 1, "cancelled by ops")
    assert [e["ended"] for e in dead.errors] == ["cancelled"]
    assert not Job.objects.exists()
    # Buried while the handler still ran; what it returned afterwards was dropped.
    assert EVENTS == ["attempt 1 started", "buried", "returned"]


@pytest.mark.django_db(transaction=True)
def test_the_process_pool_kills_a_cancelled_job(workers: Workers) -> None:
    enqueued = jobs.sleepy.enqueue("cancel-me", 60)
    worker = spawn(workers, "--pool", "process", "--lease", "3", "--max-jobs", "1")
    wait_until(lambda: runs("cancel-me") == 1, timeout=60, what="the sleepy job to start")
    assert cancel_jobs([enqueued.pk], actor="ops").stopping == [enqueued.pk]
    code, output = finish(worker, timeout=60)  # far less than the job's 60 s: it was killed
    assert code == 0, output
    assert DeadLetter.objects.get(job_id=enqueued.pk).reason == "cancelled"
    assert runs("cancel-me") == 1


@pytest.mark.django_db
class TestAdminAndCommand:
    def test_the_admin_action_needs_the_cancel_permission(self, make_user: Any) -> None:
        enqueued = jobs.record.enqueue("a")
        viewer = Operator(make_user("view_job", "view_deadletter", name="viewer"))
        data = {"action": "cancel_selected", "_selected_action": [str(enqueued.pk)]}
        viewer.post(reverse(JOBS_CHANGELIST), data, follow=True)
        assert Job.objects.filter(pk=enqueued.pk).exists()
        canceller = Operator(make_user("view_job", "view_deadletter", "cancel_job", name="canceller"))
        response = canceller.post(reverse(JOBS_CHANGELIST), data, follow=True)
        assert messages_of(response) == ["1 cancelled (now dead letters)."]
        assert DeadLetter.objects.get(job_id=enqueued.pk).last_error == "cancelled by canceller"
        assert LogEntry.objects.get().change_message.startswith("Cancelled: dead letter")

    def test_the_command_cancels_and_reports_what_was_not_live(self) -> None:
        enqueued = jobs.record.enqueue("a")
        out = io.StringIO()
        with pytest.raises(CommandError, match=r"not live jobs .*: 424242") as caught:
            call_command("canceljobs", str(enqueued.pk), "424242", "--actor", "alice", stdout=out)
        assert caught.value.returncode == 1
        assert f"cancelled job {enqueued.pk}: dead letter" in out.getvalue()
        assert DeadLetter.objects.get().last_error == "cancelled by alice"
