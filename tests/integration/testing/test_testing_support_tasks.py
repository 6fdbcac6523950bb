"""``django_jobretry.testing`` through the django.tasks front door, and in a transactional test.

A ``@task`` of JobRetryBackend is stored as a job, so ``run_jobs`` runs it
like a ``@job``; what the test then reads through ``task.get_result()`` is
what a worker would have left. The last test runs with pytest-django's
``transactional_db``: no wrapping transaction, every write committed.
"""

from __future__ import annotations

import pytest

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6+")

from django.db import connection
from django.tasks import TaskResultStatus
from django.test import TestCase

from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.policy import ErrorKind
from django_jobretry.testing import Counts, RunSummary, classify, enqueued, run_jobs
from tests.jobs_app import jobs, tasks
from tests.jobs_app.models import Execution

RESET = "builtins.ConnectionResetError"


def error_classes(result: object) -> list[str]:
    return [error.exception_class_path for error in result.errors]  # type: ignore[attr-defined]


class DjangoTasks(TestCase):
    def test_retried_then_successful_with_its_return_value(self) -> None:
        result = tasks.flaky.enqueue("k", failures=2)
        assert run_jobs(include_scheduled=True) == RunSummary(succeeded=1, retried=2)
        done = tasks.flaky.get_result(result.id)
        assert done.status == TaskResultStatus.SUCCESSFUL
        assert done.return_value == {"key": "k", "runs": 3}
        assert (done.attempts, error_classes(done)) == (3, [RESET, RESET])

    def test_exhausted_is_failed_with_every_error(self) -> None:
        result = tasks.always_fails.enqueue("k")
        summary = run_jobs(include_scheduled=True)
        assert summary.for_task(tasks.always_fails) == Counts(retried=2, dead=1)
        failed = tasks.always_fails.get_result(result.id)
        assert failed.status == TaskResultStatus.FAILED
        assert error_classes(failed) == [RESET] * 3
        assert DeadLetter.objects.get().reason == "exhausted"

    def test_fatal_is_failed_after_one_attempt(self) -> None:
        result = tasks.fatal.enqueue("k")
        assert run_jobs(include_scheduled=True) == RunSummary(dead=1)
        failed = tasks.fatal.get_result(result.id)
        assert (failed.status, failed.attempts) == (TaskResultStatus.FAILED, 1)
        assert DeadLetter.objects.get().reason == "fatal"

    def test_a_due_task_runs_once_without_include_scheduled(self) -> None:
        result = tasks.always_fails.enqueue("k")
        assert run_jobs() == RunSummary(retried=1)
        assert tasks.always_fails.get_result(result.id).status == TaskResultStatus.READY

    def test_filters_enqueued_and_classify_take_the_task(self) -> None:
        flaky = tasks.flaky.enqueue("a", failures=0)
        tasks.other_queue.enqueue("b")
        jobs.record.enqueue("c")
        assert [job.pk for job in enqueued(tasks.flaky)] == [int(flaky.id)]
        assert enqueued(tasks.flaky, kwargs={"failures": 0}) == enqueued(tasks.flaky)
        summary = run_jobs(task_name=tasks.flaky)
        assert summary.by_task == {tasks.flaky.module_path: Counts(succeeded=1)}
        assert run_jobs(queue_name="other").for_task(tasks.other_queue) == Counts(succeeded=1)
        assert enqueued(tasks.flaky) == enqueued(tasks.other_queue) == []
        assert enqueued(jobs.record) != []
        assert classify(tasks.fatal, ValueError("x")) is ErrorKind.RETRYABLE
        assert classify(tasks.flaky.module_path, ConnectionResetError()) is ErrorKind.RETRYABLE


@pytest.mark.django_db(transaction=True)
def test_in_a_transactional_test_every_outcome_is_committed(transactional_db: None) -> None:
    """No wrapping transaction: the handler writes in autocommit, as in a worker."""
    assert not connection.in_atomic_block
    jobs.flaky.enqueue("k", 2)
    result = tasks.fatal.enqueue("f")
    summary = run_jobs(include_scheduled=True)
    assert summary == RunSummary(succeeded=1, retried=2, dead=1)
    assert summary.for_task(jobs.flaky) == Counts(succeeded=1, retried=2)
    assert Job.objects.get().status == JobStatus.SUCCEEDED
    assert tasks.fatal.get_result(result.id).status == TaskResultStatus.FAILED
    assert list(Execution.objects.order_by("id").values_list("key", "attempt")) == [
        ("k", 1),
        ("f", 1),
        ("k", 2),
        ("k", 3),
    ]
