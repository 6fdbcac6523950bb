"""``django_jobretry.testing`` inside a real ``django.test.TestCase``: the jobs run in the test's transaction.

Nothing is committed here, so a worker on another connection could not see
these jobs: each test proves ``run_jobs`` runs them anyway, and records what
a worker would (attempts, retries, dead letters with their history,
signals). The django.tasks front door and a transactional test are in
test_testing_support_tasks.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.db import connection
from django.db.models.functions import Now
from django.test import TestCase

from django_jobretry import FatalError, RetryableError, RetryPolicy, job, signals
from django_jobretry.exceptions import UnknownTask
from django_jobretry.jobs import retention
from django_jobretry.jobs.record import Recorder
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.policy import ErrorKind
from django_jobretry.testing import (
    MAX_RUNS,
    Counts,
    Run,
    RunSummary,
    TooManyRuns,
    classify,
    enqueued,
    run_jobs,
)
from django_jobretry.worker.engine import Worker
from tests.factories import JobFactory
from tests.jobs_app import jobs
from tests.jobs_app.jobs import _record
from tests.jobs_app.models import Execution

RESET = "builtins.ConnectionResetError"


@job(name="tests.testing_support.later", policy="three")
def later(key: str) -> None:
    """Fails once asking for a retry in a minute: a retry that is not due during the test."""
    if _record(key) == 1:
        raise RetryableError(f"{key}: come back in a minute", delay=60)


@job(name="tests.testing_support.forever", policy="three")
def forever(key: str) -> None:
    """Enqueues itself again: a loop that never ends on its own."""
    _record(key)
    forever.enqueue(key)


@job(name="tests.testing_support.breaks_transaction", policy="three")
def breaks_transaction(key: str) -> None:
    """A database error in the handler: inside a TestCase it aborts the transaction."""
    _record(key)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 / 0")


@job(name="tests.testing_support.again", policy="three")
def again(key: str) -> None:
    """Asks to be retried at once: its retry is due as soon as it is scheduled."""
    _record(key)
    raise RetryableError(f"{key}: again", delay=0)


@job(name="tests.testing_support.picky", policy=RetryPolicy(max_attempts=2, fatal_errors=(KeyError,)))
def picky() -> None:
    """Has an inline policy that calls KeyError fatal, and raises one."""
    raise KeyError("id")


def attempts_of(key: str) -> list[int]:
    return list(Execution.objects.filter(key=key).order_by("id").values_list("attempt", flat=True))


@contextmanager
def signals_sent() -> Iterator[list[tuple[str, int, Any]]]:
    """(signal name, attempt, sender) of every worker signal sent in the block, in order."""
    sent: list[tuple[str, int, Any]] = []
    watched = {
        "started": signals.job_started,
        "succeeded": signals.job_succeeded,
        "retry": signals.job_retry_scheduled,
        "dead": signals.job_dead_lettered,
    }
    receivers = {}
    for name, signal in watched.items():

        def receive(sender: Any, *, name: str = name, attempt: int = 0, **kwargs: Any) -> None:
            sent.append((name, attempt, sender))

        receivers[name] = receive
        signal.connect(receive)
    try:
        yield sent
    finally:
        for name, signal in watched.items():
            signal.disconnect(receivers[name])


def check_exhausted_story() -> None:
    """The "always fails" scenario, asserted in full; shared with its negative control."""
    queued = jobs.always_fails.enqueue("k")
    summary = run_jobs(include_scheduled=True)
    assert summary == RunSummary(retried=2, dead=1)
    assert attempts_of("k") == [1, 2, 3]
    dead = DeadLetter.objects.get(job_id=queued.pk)
    assert (dead.reason, dead.attempts) == ("exhausted", 3)
    assert [entry["error_class"] for entry in dead.errors] == [RESET] * 3
    assert not Job.objects.exists()


class RunToTheEnd(TestCase):
    """``run_jobs(include_scheduled=True)``: each scenario of the contract, to its final state."""

    def test_success(self) -> None:
        queued = jobs.record.enqueue("k")
        summary = run_jobs(include_scheduled=True)
        assert summary == RunSummary(succeeded=1)
        assert summary.runs == (Run(queued.pk, jobs.record.name, 1, "succeeded"),)
        row = Job.objects.get()
        assert (row.status, row.attempts, row.errors) == (JobStatus.SUCCEEDED, 1, [])
        assert attempts_of("k") == [1]

    def test_retry_then_success(self) -> None:
        queued = jobs.flaky.enqueue("k", 2)
        summary = run_jobs(include_scheduled=True)
        assert summary == RunSummary(succeeded=1, retried=2)
        assert [(run.attempt, run.outcome) for run in summary.runs] == [
            (1, "retried"),
            (2, "retried"),
            (3, "succeeded"),
        ]
        assert attempts_of("k") == [1, 2, 3]
        row = Job.objects.get(pk=queued.pk)
        assert (row.status, row.attempts) == (JobStatus.SUCCEEDED, 3)
        assert [(e["attempt"], e["kind"]) for e in row.errors] == [(1, "retryable"), (2, "retryable")]
        assert [e["delay"] for e in row.errors] == [0.01, 0.02]  # the policy's backoff, recorded

    def test_fatal(self) -> None:
        queued = jobs.fatal.enqueue("k")
        assert run_jobs(include_scheduled=True) == RunSummary(dead=1)
        assert attempts_of("k") == [1]
        dead = DeadLetter.objects.get()
        assert (dead.job_id, dead.reason, dead.attempts) == (queued.pk, "fatal", 1)
        assert dead.last_error == "payload for k is invalid"
        assert not Job.objects.exists()
        assert run_jobs(include_scheduled=True) == RunSummary()  # a dead letter never runs again

    def test_exhausted(self) -> None:
        check_exhausted_story()

    def test_a_broken_run_jobs_fails_the_exhausted_test(self) -> None:
        """Negative control: a recorder that drops failures must make the scenario above fail."""
        drop = mock.patch.object(Recorder, "record_failure", return_value=None)
        with drop, pytest.raises(AssertionError, match="RunSummary"):
            check_exhausted_story()

    def test_jobs_run_in_priority_then_schedule_order(self) -> None:
        low = jobs.record.enqueue("low")
        high = jobs.record.using(priority=5).enqueue("high")
        summary = run_jobs(include_scheduled=True)
        assert [run.job_id for run in summary.runs] == [high.pk, low.pk]

    def test_a_database_error_in_a_handler_does_not_end_the_test(self) -> None:
        queued = breaks_transaction.enqueue("k")
        assert run_jobs(include_scheduled=True) == RunSummary(retried=2, dead=1)
        dead = DeadLetter.objects.get(job_id=queued.pk)
        assert dead.last_error_class == "django.db.utils.DataError"
        assert attempts_of("k") == []  # rolled back with the failed statement, each time

    def test_an_unknown_task_fails_retryably_until_dead(self) -> None:
        JobFactory.create(task_name="tests.nowhere.gone")
        assert run_jobs(include_scheduled=True) == RunSummary(retried=2, dead=1)
        dead = DeadLetter.objects.get()
        assert (dead.reason, dead.last_error_class) == ("exhausted", "django_jobretry.exceptions.UnknownTask")


class FallingDue(TestCase):
    def test_a_retry_falling_due_between_two_statements_still_runs(self) -> None:
        """The claim found nothing due, then the retry fell due before the bring-forward looked."""
        queued = jobs.record.using(run_after=timedelta(hours=1)).enqueue("k")
        real = retention.bring_forward_next

        def due_meanwhile(**filters: Any) -> list[int]:
            # The clock passing run_at between the two statements, made certain.
            Job.objects.filter(pk=queued.pk).update(run_at=Now() - timedelta(seconds=1))
            moved = real(**filters)
            assert moved == [], "nothing is scheduled later any more"
            return moved

        with mock.patch.object(retention, "bring_forward_next", side_effect=due_meanwhile):
            assert run_jobs(include_scheduled=True) == RunSummary(succeeded=1)
        assert attempts_of("k") == [1]


class RunWhatIsDue(TestCase):
    """``run_jobs()`` alone: each due job once; a retry stays scheduled."""

    def test_a_retry_scheduled_later_is_not_run(self) -> None:
        queued = later.enqueue("k")
        assert run_jobs() == RunSummary(retried=1)
        assert run_jobs() == RunSummary()
        row = Job.objects.get(pk=queued.pk)
        assert (row.status, row.attempts) == (JobStatus.READY, 1)
        assert enqueued(later) == [row]
        assert run_jobs(include_scheduled=True) == RunSummary(succeeded=1)
        assert attempts_of("k") == [1, 2]

    def test_each_due_job_runs_once_per_call_even_when_its_retry_is_due(self) -> None:
        again.enqueue("k")
        assert run_jobs() == RunSummary(retried=1)
        assert attempts_of("k") == [1]
        assert run_jobs() == RunSummary(retried=1)
        assert run_jobs() == RunSummary(dead=1)
        assert attempts_of("k") == [1, 2, 3]

    def test_a_job_scheduled_later_waits(self) -> None:
        jobs.record.using(run_after=timedelta(hours=1)).enqueue("k")
        assert run_jobs() == RunSummary()
        assert attempts_of("k") == []
        assert run_jobs(include_scheduled=True) == RunSummary(succeeded=1)


class Filters(TestCase):
    def test_by_task_in_each_spelling(self) -> None:
        for spelling in (jobs.record, jobs.record.name):
            jobs.record.enqueue("r")
            jobs.fatal.enqueue("f")
            summary = run_jobs(task_name=spelling)
            assert summary == RunSummary(succeeded=1)
            assert summary.by_task == {jobs.record.name: Counts(succeeded=1)}
        assert enqueued(jobs.fatal, args=["f"]) == list(
            Job.objects.filter(task_name=jobs.fatal.name).order_by("id")
        )
        assert len(enqueued(jobs.fatal)) == 2

    def test_by_queue(self) -> None:
        jobs.record.enqueue("default")
        jobs.other_queue.enqueue("other")
        assert run_jobs(queue_name="other").for_task(jobs.other_queue) == Counts(succeeded=1)
        assert attempts_of("other") == [1]
        assert attempts_of("default") == []

    def test_scheduled_jobs_of_other_tasks_are_not_brought_forward(self) -> None:
        later.enqueue("k")
        run_jobs()  # its retry is scheduled a minute from now
        later_job = Job.objects.get()
        jobs.record.enqueue("r")
        assert run_jobs(include_scheduled=True, task_name=jobs.record) == RunSummary(succeeded=1)
        assert Job.objects.get(pk=later_job.pk).run_at == later_job.run_at

    def test_summary_per_task(self) -> None:
        jobs.flaky.enqueue("a", 1)
        jobs.fatal.enqueue("b")
        summary = run_jobs(include_scheduled=True)
        assert summary == RunSummary(succeeded=1, retried=1, dead=1)
        assert summary.for_task(jobs.flaky) == Counts(succeeded=1, retried=1)
        assert summary.for_task(jobs.fatal.name) == Counts(dead=1)
        assert summary.for_task(jobs.record) == Counts()
        assert summary.total == 3

    def test_a_task_that_is_not_a_task_is_refused(self) -> None:
        with pytest.raises(TypeError, match="is not a task"):
            run_jobs(task_name=42)  # type: ignore[arg-type]


class Signals(TestCase):
    def test_every_worker_signal_is_sent_with_the_worker_as_sender(self) -> None:
        jobs.flaky.enqueue("k", 1)
        jobs.fatal.enqueue("f")
        with signals_sent() as sent:
            run_jobs(include_scheduled=True)
        assert [(name, attempt) for name, attempt, _ in sent] == [
            ("started", 1),
            ("retry", 1),
            ("started", 1),
            ("dead", 1),
            ("started", 2),
            ("succeeded", 2),
        ]
        assert {sender for _, _, sender in sent} == {Worker}


class LoopBound(TestCase):
    def test_a_job_that_enqueues_itself_is_stopped_with_a_clear_error(self) -> None:
        forever.enqueue("k")
        with pytest.raises(
            TooManyRuns, match=r"stopped after 1000 attempts .* enqueues or reschedules itself"
        ):
            run_jobs()
        assert Execution.objects.filter(key="k").count() == MAX_RUNS == 1000

    def test_a_limit_of_one_run_says_one_attempt(self) -> None:
        forever.enqueue("one")
        with pytest.raises(TooManyRuns, match=r"run_jobs\(\) stopped after 1 attempt and jobs are still due"):
            run_jobs(max_runs=1)
        left = Job.objects.get(status=JobStatus.READY)
        assert left.attempts == 0  # the attempt it would have made next is not counted

    def test_the_bound_can_be_chosen(self) -> None:
        forever.enqueue("k")
        with pytest.raises(TooManyRuns, match="after 5 attempts"):
            run_jobs(include_scheduled=True, max_runs=5)
        assert Execution.objects.filter(key="k").count() == 5

    def test_exactly_the_bound_is_not_an_error(self) -> None:
        jobs.always_fails.enqueue("k")
        assert run_jobs(include_scheduled=True, max_runs=3) == RunSummary(retried=2, dead=1)


class Enqueued(TestCase):
    def test_ready_jobs_oldest_first_without_running_them(self) -> None:
        first = jobs.record.enqueue("a")
        second = jobs.record.using(queue_name="other").enqueue("b")
        jobs.fatal.enqueue("c")
        assert enqueued(jobs.record) == [first, second]
        assert enqueued(jobs.record.name, queue_name="other") == [second]
        assert enqueued(jobs.record, args=["a"]) == [first]
        assert attempts_of("a") == []
        run_jobs(task_name=jobs.record)
        assert enqueued(jobs.record) == []


class Classify(TestCase):
    def test_with_the_tasks_own_policy(self) -> None:
        assert classify(jobs.fatal, FatalError("bad")) is ErrorKind.FATAL
        assert classify(jobs.flaky, ConnectionResetError()) == "retryable"
        assert classify(jobs.flaky.name, RetryableError("later")) is ErrorKind.RETRYABLE
        assert classify(picky, KeyError("id")) is ErrorKind.FATAL
        assert classify(picky.name, KeyError("id")) is ErrorKind.FATAL
        assert classify(jobs.record, KeyError("id")) is ErrorKind.RETRYABLE

    def test_matches_what_a_worker_records(self) -> None:
        picky.enqueue()
        assert run_jobs() == RunSummary(dead=1)
        assert DeadLetter.objects.get().reason == classify(picky, KeyError("id")) == "fatal"

    def test_an_unregistered_task_is_a_clear_error(self) -> None:
        with pytest.raises(UnknownTask, match="not registered"):
            classify("tests.nowhere.gone", ValueError())
