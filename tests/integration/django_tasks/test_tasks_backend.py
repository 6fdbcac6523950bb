"""JobRetryBackend results: every internal state of a task, read back through ``get_result()``.

Each state is reached with the worker's own transitions (claim, Recorder,
lease recovery, the dead-letter service), never by writing rows, so the
result is read from exactly what a worker leaves behind. The rules checked:
status mapping (ready -> READY, running -> RUNNING, succeeded -> SUCCESSFUL,
dead letter -> FAILED), one TaskError per history entry, one worker id per
attempt across requeues, started_at = first attempt, last_attempted_at =
the last attempt's start, finished_at only once finished; the result id
(the chain's first job id) across requeues; and no result once `prunejobs`
deleted the job. Django 6+ only (tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db.models import DurationField, Value
from django.db.models.functions import Now
from django.tasks import TaskResultStatus
from django.tasks.base import TaskResult
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_finished

from django_jobretry import FatalError
from django_jobretry import deadletters as service
from django_jobretry.backends import JobRetryBackend
from django_jobretry.contrib.django_tasks.results import LOST_ATTEMPT_CLASS
from django_jobretry.jobs import recovery
from django_jobretry.jobs.recovery import bury_cancelled_attempt, cancel_jobs
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.integration.django_tasks.tasks_backend import claim_due, fail, succeed
from tests.jobs_app import tasks

pytestmark = pytest.mark.django_db

RESET = "builtins.ConnectionResetError"
FATAL = "django_jobretry.exceptions.FatalError"


def fetch(result: TaskResult[..., Any]) -> TaskResult[..., Any]:
    """The result read again by id, as another process would."""
    fetched = tasks.flaky.get_result(result.id)
    assert fetched.id == result.id
    return fetched


def error_classes(result: TaskResult[..., Any]) -> list[str]:
    return [error.exception_class_path for error in result.errors]


class TestEachState:
    def test_a_fresh_task_is_ready_with_nothing_attempted(self) -> None:
        enqueued = tasks.flaky.enqueue("k", failures=0)
        job = Job.objects.get()
        assert enqueued.id == str(job.pk)
        for result in (enqueued, fetch(enqueued)):
            assert result.status == TaskResultStatus.READY
            assert (result.args, result.kwargs, result.backend) == (["k"], {"failures": 0}, "default")
            assert result.enqueued_at == job.enqueued_at is not None
            assert (result.started_at, result.last_attempted_at, result.finished_at) == (None, None, None)
            assert (result.errors, result.worker_ids, result.attempts) == ([], [], 0)
            assert not result.is_finished
            with pytest.raises(ValueError, match="not finished"):
                _ = result.return_value

    def test_a_running_task_names_its_worker(self) -> None:
        enqueued = tasks.flaky.enqueue("k", 0)
        claim_due("worker-a")
        job = Job.objects.get()
        result = fetch(enqueued)
        assert result.status == TaskResultStatus.RUNNING
        assert (result.worker_ids, result.attempts, result.errors) == (["worker-a"], 1, [])
        assert result.started_at == job.first_attempt_at is not None
        assert result.last_attempted_at == job.started_at is not None
        assert result.finished_at is None

    def test_a_task_waiting_for_its_retry_is_ready_with_its_errors(self) -> None:
        enqueued = tasks.flaky.enqueue("k", 5)
        fail("worker-a", ConnectionResetError("reset one"))
        first = fetch(enqueued)
        job = Job.objects.get()
        assert (job.status, job.attempts) == (JobStatus.READY, 1)
        assert first.status == TaskResultStatus.READY
        assert (error_classes(first), first.worker_ids) == ([RESET], ["worker-a"])
        assert "reset one" in first.errors[0].traceback
        assert first.errors[0].exception_class is ConnectionResetError
        assert first.started_at == job.first_attempt_at is not None
        assert first.last_attempted_at == job.started_at is not None
        assert first.finished_at is None

        fail("worker-b", ConnectionResetError("reset two"))
        second = fetch(enqueued)
        assert (error_classes(second), second.worker_ids) == ([RESET, RESET], ["worker-a", "worker-b"])
        assert second.started_at == first.started_at
        assert first.last_attempted_at is not None
        assert second.last_attempted_at is not None
        assert second.last_attempted_at > first.last_attempted_at

    def test_a_succeeded_task_is_successful_with_its_return_value(self) -> None:
        enqueued = tasks.flaky.enqueue("k", 1)
        fail("worker-a", ConnectionResetError("reset"))
        succeed("worker-b", {"key": "k", "runs": 2})
        job = Job.objects.get()
        result = fetch(enqueued)
        assert result.status == TaskResultStatus.SUCCESSFUL
        assert result.is_finished
        assert result.return_value == {"key": "k", "runs": 2}
        assert (error_classes(result), result.worker_ids) == ([RESET], ["worker-a", "worker-b"])
        assert result.started_at == job.first_attempt_at
        assert result.last_attempted_at == job.started_at
        assert result.finished_at == job.finished_at is not None
        assert result.started_at is not None
        assert result.last_attempted_at is not None
        assert result.last_attempted_at > result.started_at

    def test_a_result_pruned_by_retention_no_longer_exists(self) -> None:
        enqueued = tasks.flaky.enqueue("k", 0)
        succeed("worker-a", {"key": "k", "runs": 1})
        assert fetch(enqueued).status == TaskResultStatus.SUCCESSFUL
        # Only its age is written: the test's transaction has one now(), so nothing is older yet.
        ten_days_ago = Now() - Value(timedelta(days=10), output_field=DurationField())
        Job.objects.update(finished_at=ten_days_ago)
        call_command("prunejobs", "--older-than", "7d", stdout=StringIO())
        assert not Job.objects.exists()
        with pytest.raises(TaskResultDoesNotExist):
            tasks.flaky.get_result(enqueued.id)

    def test_a_dead_letter_is_failed_with_every_error(self) -> None:
        enqueued = tasks.always_fails.enqueue("k")
        for owner in ("w1", "w2", "w3"):
            fail(owner, ConnectionResetError(f"reset by {owner}"))
        dead = DeadLetter.objects.get()
        assert (dead.job_id, dead.reason, dead.attempts) == (int(enqueued.id), "exhausted", 3)
        result = tasks.always_fails.get_result(enqueued.id)
        assert result.status == TaskResultStatus.FAILED
        assert result.is_finished
        assert (error_classes(result), result.worker_ids) == ([RESET] * 3, ["w1", "w2", "w3"])
        assert ["reset by w1" in e.traceback for e in result.errors] == [True, False, False]
        assert result.started_at == dead.first_attempt_at is not None
        assert result.last_attempted_at == datetime.fromisoformat(dead.errors[-1]["at"])
        assert result.finished_at == dead.dead_at
        with pytest.raises(ValueError, match="failed"):
            _ = result.return_value

    def test_a_fatal_error_fails_the_task_after_one_attempt(self) -> None:
        enqueued = tasks.fatal.enqueue("k")
        fail("w1", FatalError("bad k"))
        result = tasks.fatal.get_result(enqueued.id)
        assert (result.status, error_classes(result), result.worker_ids) == (
            TaskResultStatus.FAILED,
            [FATAL],
            ["w1"],
        )

    def test_a_lost_attempt_is_an_attempt_lost_error_and_counts(self) -> None:
        enqueued = tasks.attempts.enqueue("k", 0)
        claim_due("killed-worker")
        past = Now() - Value(timedelta(seconds=1), output_field=DurationField())
        Job.objects.filter(status=JobStatus.RUNNING).update(lease_expires_at=past)  # time passes
        [recovered] = recovery.recover_expired(10, 100)
        assert (recovered.attempt, recovered.buried) == (1, False)
        lost = tasks.attempts.get_result(enqueued.id)
        assert lost.status == TaskResultStatus.READY
        assert (error_classes(lost), lost.worker_ids) == ([LOST_ATTEMPT_CLASS], ["killed-worker"])
        assert "lease_expired" in lost.errors[0].traceback
        assert lost.errors[0].exception_class.__name__ == "AttemptLost"
        claim_due("rescuer")
        running = tasks.attempts.get_result(enqueued.id)
        assert running.status == TaskResultStatus.RUNNING
        assert (running.worker_ids, running.attempts) == (["killed-worker", "rescuer"], 2)


class TestRequeue:
    def test_the_result_id_survives_requeues_with_its_history(self) -> None:
        enqueued = tasks.succeeds_when.enqueue("k", "/nonexistent/flag")
        fail("w1", FatalError("bad once"))
        dead = tasks.succeeds_when.get_result(enqueued.id)
        statuses = [dead.status]

        service.requeue(DeadLetter.objects.get().pk, actor="operator")
        job = Job.objects.get()
        assert job.pk != int(enqueued.id), "a requeue makes a new job (decision 0005)"
        ready = tasks.succeeds_when.get_result(enqueued.id)
        statuses.append(ready.status)
        assert (error_classes(ready), ready.worker_ids, ready.finished_at) == ([FATAL], ["w1"], None)
        # The result began with the first job: its enqueue and first attempt, across the requeue.
        assert job.first_attempt_at is None
        assert (ready.enqueued_at, ready.started_at) == (enqueued.enqueued_at, dead.started_at)
        assert dead.started_at is not None

        fail("w2", ConnectionResetError("still down"))
        retrying = tasks.succeeds_when.get_result(enqueued.id)
        assert (error_classes(retrying), retrying.worker_ids) == ([FATAL, RESET], ["w1", "w2"])
        succeed("w3", "fixed")
        done = tasks.succeeds_when.get_result(enqueued.id)
        statuses.append(done.status)
        assert statuses == [TaskResultStatus.FAILED, TaskResultStatus.READY, TaskResultStatus.SUCCESSFUL]
        assert (done.id, done.return_value, done.attempts) == (enqueued.id, "fixed", 3)
        assert (error_classes(done), done.worker_ids) == ([FATAL, RESET], ["w1", "w2", "w3"])
        assert done.finished_at == Job.objects.get().finished_at
        assert (done.enqueued_at, done.started_at) == (enqueued.enqueued_at, dead.started_at)

    def test_a_task_requeued_twice_and_dead_again_keeps_its_id(self) -> None:
        enqueued = tasks.fatal.enqueue("k")
        for round_, owner in enumerate(("w1", "w2", "w3")):
            fail(owner, FatalError(f"bad {round_}"))
            if round_ < 2:
                service.requeue(DeadLetter.objects.get().pk, actor="operator")
        dead = DeadLetter.objects.get()
        assert (dead.requeue_count, dead.job_id != int(enqueued.id)) == (2, True)
        result = tasks.fatal.get_result(enqueued.id)
        assert (result.id, result.status) == (enqueued.id, TaskResultStatus.FAILED)
        assert (error_classes(result), result.worker_ids) == ([FATAL] * 3, ["w1", "w2", "w3"])
        # The ids of the later jobs of the chain are not result ids of their own.
        for later in {dead.job_id, *(e["job_id"] for e in dead.requeue_history[1:])}:
            with pytest.raises(TaskResultDoesNotExist):
                tasks.fatal.get_result(str(later))


class TestCancel:
    """An operator's cancel ends a task as a "cancelled" dead letter: FAILED, and finished."""

    @pytest.fixture
    def finished(self) -> Iterator[list[TaskResult[..., Any]]]:
        sent: list[TaskResult[..., Any]] = []

        def receive(sender: type, task_result: TaskResult[..., Any], **kwargs: Any) -> None:
            assert sender is JobRetryBackend
            sent.append(task_result)

        task_finished.connect(receive, weak=False)
        yield sent
        task_finished.disconnect(receive)

    def test_a_waiting_task_cancelled_is_failed_with_no_attempt(self, finished: list[Any]) -> None:
        enqueued = tasks.flaky.enqueue("k", 0)
        cancel_jobs([int(enqueued.id)], actor="ops")
        result = fetch(enqueued)
        assert (result.status, error_classes(result), result.worker_ids) == (
            TaskResultStatus.FAILED,
            [LOST_ATTEMPT_CLASS],
            [],
        )
        assert "cancelled by ops" in result.errors[0].traceback
        assert [(r.id, r.status) for r in finished] == [(enqueued.id, TaskResultStatus.FAILED)]

    def test_a_task_waiting_for_its_retry_keeps_its_worker_when_cancelled(self, finished: list[Any]) -> None:
        enqueued = tasks.flaky.enqueue("k", 5)
        fail("w1", ConnectionResetError("reset"))
        cancel_jobs([int(enqueued.id)], actor="ops")
        result = fetch(enqueued)
        assert result.status == TaskResultStatus.FAILED
        assert (error_classes(result), result.worker_ids) == ([RESET, LOST_ATTEMPT_CLASS], ["w1"])
        assert [r.status for r in finished] == [TaskResultStatus.FAILED]

    def test_a_running_task_cancelled_by_its_worker(self, finished: list[Any]) -> None:
        enqueued = tasks.flaky.enqueue("k", 0)
        claimed = claim_due("w1")
        assert cancel_jobs([claimed.id], actor="ops").stopping == [claimed.id]
        assert fetch(enqueued).status == TaskResultStatus.RUNNING, "running until its worker stops it"
        bury_cancelled_attempt(claimed, "ops", worker_id="w1", sender=JobRetryBackend)
        result = fetch(enqueued)
        assert (result.status, error_classes(result), result.worker_ids) == (
            TaskResultStatus.FAILED,
            [LOST_ATTEMPT_CLASS],
            ["w1"],
        )
        assert [r.status for r in finished] == [TaskResultStatus.FAILED]
