"""Django's task framework contract, as Django's own and django-tasks-db's test suites check it.

Each test is one of their checks, run against JobRetryBackend: a fetched
result equals the enqueued one, ``except TypeError`` catches arguments the
task cannot take, and the log line of a failed task carries its traceback.
Django 6+ only (tests/conftest.py leaves this module out on Django 5.2).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.dispatch import receiver
from django.tasks import TaskResultStatus, default_task_backend
from django.tasks.exceptions import InvalidTask
from django.tasks.signals import task_enqueued
from django.utils import timezone

from django_jobretry import deadletters
from django_jobretry.exceptions import InvalidJob, UnsupportedArgument
from django_jobretry.jobs import claim
from django_jobretry.models import DeadLetter, Job
from django_jobretry.testing import run_jobs
from django_jobretry.worker.runner import STALE_ARGUMENTS_RULE
from tests.jobs_app import tasks

pytestmark = pytest.mark.django_db


class NotJson:
    pass


@pytest.fixture
def enqueued_signals() -> Any:
    sent: list[Any] = []

    @receiver(task_enqueued, weak=False)
    def record(sender: type, **kwargs: Any) -> None:
        sent.append(kwargs["task_result"])

    yield sent
    task_enqueued.disconnect(record)


class TestGetResult:
    def test_the_fetched_result_equals_the_enqueued_one_with_its_using_options(self) -> None:
        run_after = timezone.now() + timedelta(hours=1)
        result = tasks.flaky.using(priority=10, queue_name="other", run_after=run_after).enqueue("k", 0)
        fetched = default_task_backend.get_result(result.id)
        assert fetched == result
        assert (fetched.task.priority, fetched.task.queue_name, fetched.task.run_after) == (
            10,
            "other",
            run_after,
        )
        assert fetched.task.func is tasks.flaky.func

    def test_a_result_without_options_reports_the_decorated_task(self) -> None:
        result = tasks.other_queue.enqueue("k")
        assert tasks.other_queue.get_result(result.id).task is tasks.other_queue

    def test_a_task_whose_queue_left_queues_since_is_reported_as_decorated(self, settings: Any) -> None:
        result = tasks.other_queue.using(priority=-1).enqueue("k")
        settings.TASKS = {"default": {**settings.TASKS["default"], "QUEUES": ["default"]}}
        assert default_task_backend.get_result(result.id).task is tasks.other_queue

    def test_a_running_task_keeps_its_options(self) -> None:
        run_after = timezone.now() - timedelta(seconds=1)
        result = tasks.flaky.using(priority=-3, run_after=run_after).enqueue("k", 0)
        claim.claim("worker-a", 1, 30, None)
        fetched = tasks.flaky.get_result(result.id)
        assert fetched.status == TaskResultStatus.RUNNING
        assert fetched.task == result.task


class TestRunAfter:
    """``get_result().task.run_after`` is the enqueue's, whatever moved the job's ``run_at`` since."""

    def test_fetched_results_keep_their_run_after_and_priority(self) -> None:
        """django-tasks-db's test_run_after_priority, its equality part (the rest reads its own table)."""
        now, task = timezone.now(), tasks.other_queue
        results = [
            task.using(priority=20, run_after=now - timedelta(hours=2)).enqueue("old"),
            task.using(priority=20, run_after=now - timedelta(hours=10)).enqueue("very old"),
            task.using(run_after=now + timedelta(hours=10)).enqueue("far future"),
            task.using(priority=10, run_after=now + timedelta(hours=10)).enqueue("high far future"),
            task.using(run_after=now + timedelta(hours=2)).enqueue("future"),
            task.using(priority=10).enqueue("high"),
            task.using(priority=2).enqueue("low"),
            task.using(priority=-2).enqueue("lower"),
        ]
        fetched = [default_task_backend.get_result(result.id) for result in results]
        assert fetched == results
        assert [f.task.run_after for f in fetched] == [r.task.run_after for r in results]

    def test_a_retried_task_keeps_its_run_after(self) -> None:
        run_after = timezone.now() - timedelta(seconds=1)
        result = tasks.flaky.using(run_after=run_after).enqueue("k", 1)
        run_jobs(include_scheduled=True)  # fails once, is retried, succeeds
        fetched = tasks.flaky.get_result(result.id)
        assert (fetched.status, fetched.attempts) == (TaskResultStatus.SUCCESSFUL, 2)
        assert fetched.task.run_after == run_after
        assert fetched == result.task.get_result(result.id)

    def test_a_task_run_early_by_run_jobs_keeps_its_run_after(self) -> None:
        run_after = timezone.now() + timedelta(hours=1)
        result = tasks.other_queue.using(run_after=run_after).enqueue("k")
        run_jobs(include_scheduled=True)  # moves run_at to now
        fetched = tasks.other_queue.get_result(result.id)
        assert (fetched.status, fetched.task.run_after) == (TaskResultStatus.SUCCESSFUL, run_after)

    def test_a_dead_task_and_its_requeue_keep_its_run_after(self) -> None:
        run_after = timezone.now() - timedelta(minutes=5)
        result = tasks.fatal.using(run_after=run_after).enqueue("k")
        run_jobs()
        dead = tasks.fatal.get_result(result.id)
        assert (dead.status, dead.task.run_after) == (TaskResultStatus.FAILED, run_after)
        deadletters.requeue(DeadLetter.objects.get().pk, run_after=timedelta(hours=1))
        requeued = tasks.fatal.get_result(result.id)
        assert (requeued.status, requeued.task.run_after) == (TaskResultStatus.READY, run_after)

    def test_a_task_enqueued_without_run_after_reads_none(self) -> None:
        result = tasks.flaky.enqueue("k", 1)
        run_jobs()  # one failed attempt: the retry moved run_at
        fetched = tasks.flaky.get_result(result.id)
        assert (fetched.status, fetched.task.run_after) == (TaskResultStatus.READY, None)


class TestAnUndeclaredQueue:
    def test_is_refused_in_djangos_words_then_ours(self) -> None:
        """Django's test_unknown_queue_name: ``InvalidTask`` saying "Queue '...' is not valid for backend."

        Django's words lead, then ours name the task and the setting.
        """
        with pytest.raises(InvalidTask) as refused:
            tasks.other_queue.using(queue_name="othr")
        assert str(refused.value) == (
            "Queue 'othr' is not valid for backend. Task 'tests.jobs_app.tasks.other_queue' uses the queue "
            "'othr', which TASKS[\"default\"][\"QUEUES\"] does not list: it lists ['default', 'other']. "
            "Did you mean 'other'?"
        )


class TestArgumentsTheTaskCannotTake:
    @pytest.mark.parametrize(
        ("args", "kwargs"),
        [
            pytest.param(("k", NotJson()), {}, id="not-json"),
            pytest.param(("k",), {"failures": {1, 2}}, id="a-set"),
            pytest.param(("k", 0, 1), {}, id="too-many-positional"),
            pytest.param(("k",), {}, id="missing"),
            pytest.param(("k", 0), {"colour": "red"}, id="unknown-keyword"),
        ],
    )
    def test_are_a_type_error_and_an_invalid_job_and_store_nothing(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], enqueued_signals: list[Any]
    ) -> None:
        with pytest.raises(TypeError) as refused:
            tasks.flaky.enqueue(*args, **kwargs)
        assert isinstance(refused.value, InvalidJob)
        assert (Job.objects.count(), enqueued_signals) == (0, [])

    def test_a_value_json_has_no_form_for_is_refused_in_djangos_words_then_ours(self) -> None:
        """Django's test_enqueue_with_invalid_argument: ``TypeError`` saying "Unsupported type"."""
        with pytest.raises(TypeError, match="Unsupported type") as refused:
            tasks.flaky.enqueue(datetime.now(), 0)  # type: ignore[arg-type]
        assert isinstance(refused.value, UnsupportedArgument)
        assert refused.value.value_type is datetime
        assert str(refused.value) == (
            "Unsupported type: <class 'datetime.datetime'>: positional argument 0 of task "
            "'tests.jobs_app.tasks.flaky' is a datetime.datetime, which is not JSON-serialisable; "
            "pass plain data (str, int, float, bool, None, list, dict), e.g. an id"
        )
        assert Job.objects.count() == 0

    def test_aenqueue_refuses_it_in_the_same_words(self) -> None:
        """Django's test_aenqueue_with_invalid_argument."""
        with pytest.raises(TypeError, match="Unsupported type"):
            async_to_sync(tasks.flaky.aenqueue)(datetime.now(), 0)  # type: ignore[arg-type]
        assert Job.objects.count() == 0

    def test_the_message_names_the_task_and_the_mismatch(self) -> None:
        with pytest.raises(
            TypeError, match=r"^tests\.jobs_app\.tasks\.flaky\(\) cannot take these arguments: "
        ):
            tasks.flaky.enqueue("k", 0, colour="red")  # type: ignore[call-arg]

    def test_a_task_that_takes_context_binds_its_arguments_after_the_context(self) -> None:
        tasks.attempts.enqueue("k", 0)
        with pytest.raises(TypeError, match="missing a required argument: 'failures'"):
            tasks.attempts.enqueue("k")  # type: ignore[call-arg]
        assert Job.objects.count() == 1

    def test_stored_arguments_that_no_longer_bind_fail_the_task_after_one_attempt(self) -> None:
        result = tasks.flaky.enqueue("k", 0)
        Job.objects.filter(pk=int(result.id)).update(kwargs={"retries": 3})
        run_jobs(include_scheduled=True)
        result.refresh()
        assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 1)
        assert result.errors[0].exception_class_path == "django_jobretry.exceptions.StaleArguments"
        assert DeadLetter.objects.get().errors[0]["rule"] == STALE_ARGUMENTS_RULE


class TestFinishedLogLine:
    def test_the_log_line_of_a_failed_task_carries_its_traceback(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        result = tasks.fatal.enqueue("k")
        with caplog.at_level(logging.DEBUG, logger="django.tasks"):
            run_jobs()
        [failed] = [r for r in caplog.records if r.name == "django.tasks" and r.levelno == logging.ERROR]
        assert f"id={result.id}" in failed.getMessage()
        assert "state=FAILED" in failed.getMessage()
        assert failed.exc_info is not None
        assert failed.exc_info[0] is not None
        text = caplog.text
        assert "Traceback (most recent call last)" in text
        assert 'raise FatalError(f"{key} is bad")' in text, "the task's own frame, as recorded"
        assert "django_jobretry.policy.errors.FatalError: k is bad" in text

    def test_the_log_line_of_a_successful_task_has_no_traceback(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        tasks.other_queue.enqueue("k")
        with caplog.at_level(logging.DEBUG, logger="django.tasks"):
            run_jobs()
        [finished] = [
            r for r in caplog.records if r.name == "django.tasks" and "SUCCESSFUL" in r.getMessage()
        ]
        assert (finished.levelno, finished.exc_info) == (logging.INFO, None)
