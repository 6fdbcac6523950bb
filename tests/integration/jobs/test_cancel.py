"""Operator cancel: ready jobs die at once as "cancelled"; running ones are stopped by their worker."""

from __future__ import annotations

import io
import threading
import time
from typing import Any

import pytest
from django.contrib.admin import site
from django.contrib.admin.models import LogEntry
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.backends.db import SessionStore
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import RequestFactory
from django.urls import reverse

from django_jobretry import RetryPolicy, current_job, deadletters, job
from django_jobretry.admin.jobs import JobAdmin
from django_jobretry.jobs.claimed import succeed
from django_jobretry.jobs.recovery import cancel_jobs
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.attempts import claim_one, kill
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
        assert succeed([claimed]) == {claimed.id}
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


LONG_NAME = "o" * 300  # a custom user model's username may be this long


@pytest.mark.django_db
class TestActors:
    """Who cancels is recorded, and never makes the cancel fail (issue 17, point 14)."""

    def test_the_command_refuses_an_actor_longer_than_it_records(self) -> None:
        enqueued = jobs.record.enqueue("a")
        with pytest.raises(CommandError, match=r"--actor: is 151 characters long; at most 150 characters"):
            call_command("canceljobs", str(enqueued.pk), "--actor", "a" * 151, stdout=io.StringIO())
        assert (Job.objects.get().status, DeadLetter.objects.exists()) == (JobStatus.READY, False)
        claimed = claim_one()
        call_command("canceljobs", str(claimed.id), "--actor", "a" * 150, stdout=io.StringIO())
        assert Job.objects.get().cancel_requested_by == "a" * 150

    def test_the_admin_cancels_for_a_user_whose_username_is_longer(self, admin_user: Any) -> None:
        ready = jobs.record.enqueue("ready")
        running = claim_one()
        ready = jobs.record.enqueue("ready")
        admin_user.username = LONG_NAME  # what get_username() gives with a custom user model
        request = RequestFactory().post(reverse(JOBS_CHANGELIST))
        request.user, request.session = admin_user, SessionStore()
        request._messages = FallbackStorage(request)  # type: ignore[attr-defined]
        job_admin = site.get_model_admin(Job)
        assert isinstance(job_admin, JobAdmin)
        job_admin.cancel_selected(request, Job.objects.all())
        recorded = Job.objects.get(pk=running.id).cancel_requested_by
        assert (len(recorded), recorded.startswith("ooo"), recorded.endswith("characters cut]")) == (
            150,
            True,
            True,
        )
        assert DeadLetter.objects.get(job_id=ready.pk).last_error == f"cancelled by {recorded}"

    def test_any_name_is_recorded_without_failing(self) -> None:
        jobs.record.enqueue("a")
        claimed = claim_one()
        assert cancel_jobs([claimed.id], actor="nul\x00and \udcff" + "x" * 10_000).stopping == [claimed.id]
        assert Job.objects.get().cancel_requested_by.startswith("nul\\0and ?x")

    @pytest.mark.parametrize("actor", [LONG_NAME * 100, "nul\x00", "surrogate \udcff"])
    def test_requeue_and_discard_record_any_name_too(self, actor: str) -> None:
        dead = kill(key="k1")
        revived = deadletters.requeue(dead.pk, actor=actor)
        assert isinstance(revived, Job)
        kill(key="k2")
        deadletters.discard(DeadLetter.objects.get().pk, actor=actor)
        assert not DeadLetter.objects.exists()
