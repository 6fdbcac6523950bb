"""Enqueue: validation, transactions, unique keys, bulk, run_after - against PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.db.models.functions import Now

from django_jobretry import RetryPolicy
from django_jobretry.decorators import JobDefinition, job
from django_jobretry.exceptions import InvalidJob, UnknownPolicy
from django_jobretry.models import Job, JobStatus
from django_jobretry.registry import INLINE_POLICY, registry
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db


class NotJson:
    pass


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((NotJson(),), {}, f"positional argument 0 of task .* is a {__name__}.NotJson"),
        ((), {"when": datetime.now(UTC)}, "keyword argument 'when' .* datetime.datetime"),
        (({1: "x"},), {}, "dict key 1 of type int; JSON object keys must be strings"),
        (("a\x00b",), {}, "NUL character"),
        ((float("nan"),), {}, "NaN or infinity"),
        (({"s": {1, 2}},), {}, "is a builtins.set"),
    ],
)
def test_bad_arguments_are_refused_and_nothing_is_written(args: Any, kwargs: Any, message: str) -> None:
    with pytest.raises(InvalidJob, match=message):
        jobs.takes_anything.enqueue(*args, **kwargs)
    assert Job.objects.count() == 0


def test_oversized_arguments_are_refused(settings: Any) -> None:
    settings.JOBRETRY = {**settings.JOBRETRY, "MAX_ARGS_BYTES": 1024}
    with pytest.raises(InvalidJob, match=r"are \d+ bytes as JSON; the limit is 1024"):
        jobs.record.enqueue("x" * 2000)
    assert Job.objects.count() == 0


def test_too_deep_arguments_are_refused(settings: Any) -> None:
    settings.JOBRETRY = {**settings.JOBRETRY, "MAX_ARGS_DEPTH": 3}
    with pytest.raises(InvalidJob, match="nested deeper than 3 levels"):
        jobs.takes_anything.enqueue([[[["deep"]]]])


def test_enqueue_stores_what_the_worker_needs() -> None:
    stored = jobs.flaky.using(priority=5, queue_name="bulk").enqueue("k", failures=2)
    row = Job.objects.get(pk=stored.pk)
    assert (row.task_name, row.queue_name, row.policy_name, row.priority) == (
        "tests.jobs_app.jobs.flaky",
        "bulk",
        "three",
        5,
    )
    assert (row.args, row.kwargs, row.status, row.attempts, row.max_attempts) == (
        ["k"],
        {"failures": 2},
        JobStatus.READY,
        0,
        3,
    )
    assert row.run_at == row.enqueued_at
    assert stored.run_at == row.run_at  # database defaults are returned to the caller


def test_tuples_arrive_as_lists() -> None:
    row = jobs.takes_anything.enqueue(("a", 1))
    assert Job.objects.get(pk=row.pk).args == [["a", 1]]


def test_rolled_back_transaction_leaves_no_job() -> None:
    def enqueue_then_fail() -> None:
        with transaction.atomic():
            jobs.record.enqueue("gone")
            raise RuntimeError

    with pytest.raises(RuntimeError):
        enqueue_then_fail()
    assert Job.objects.count() == 0


def test_run_after_timedelta_uses_the_database_clock() -> None:
    def database_clock() -> datetime:
        with connection.cursor() as cursor:
            cursor.execute("SELECT clock_timestamp()")
            return cursor.fetchone()[0]  # type: ignore[no-any-return]

    before = database_clock()
    row = jobs.record.using(run_after=timedelta(hours=1)).enqueue("later")
    after = database_clock()
    assert before <= row.run_at - timedelta(hours=1) <= after


def test_run_after_datetime_is_kept() -> None:
    when = datetime(2030, 1, 1, tzinfo=UTC)
    assert jobs.record.using(run_after=when).enqueue("x").run_at == when


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"queue_name": "bad queue"}, "queue_name 'bad queue' is invalid"),
        ({"priority": 101}, "priority 101 is invalid: an integer from -100 to 100"),
        ({"priority": True}, "priority True is invalid"),
        ({"run_after": "tomorrow"}, "run_after 'tomorrow' is invalid"),
        ({"run_after": datetime(2030, 1, 1)}, "naive datetime"),
        ({"unique_key": ""}, "unique_key '' is invalid"),
        ({"policy": 3}, r"using\(policy=3\) takes a policy name"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidJob, match=message):
        jobs.record.using(**options)


def test_unknown_option_is_a_clear_type_error() -> None:
    with pytest.raises(TypeError, match="queu_name"):
        jobs.record.using(queu_name="x")  # type: ignore[call-arg]


def test_unknown_policy_fails_at_enqueue_and_writes_nothing() -> None:
    with pytest.raises(UnknownPolicy, match="'nope'"):
        jobs.record.using(policy="nope").enqueue("x")
    assert Job.objects.count() == 0


def test_inline_policy_freezes_its_max_attempts() -> None:
    row = jobs.budgeted.enqueue("x")
    assert (row.policy_name, row.max_attempts) == (INLINE_POLICY, 1)


def test_using_takes_only_policy_names() -> None:
    with pytest.raises(InvalidJob, match=r"takes a policy name .* pass a RetryPolicy to @job"):
        jobs.record.using(policy=RetryPolicy(max_attempts=7))  # type: ignore[arg-type]


def test_using_a_named_policy_is_what_the_worker_applies() -> None:
    row = jobs.always_fails.using(policy="default").enqueue("x")
    assert (row.policy_name, row.max_attempts) == ("default", 20)


def test_bad_task_names_are_refused() -> None:
    with pytest.raises(InvalidJob, match="task name '9lives' is invalid"):
        JobDefinition(func=print, name="9lives")


def test_job_decorator_registers_by_dotted_path_and_calls_through() -> None:
    assert registry.get("tests.jobs_app.jobs.record") is jobs.record
    assert jobs.noop() is None


def test_a_second_function_under_one_name_is_refused() -> None:
    from django_jobretry.exceptions import DuplicateTaskName

    with pytest.raises(DuplicateTaskName, match=r"tests\.jobs_app\.jobs\.record"):
        job(name="tests.jobs_app.jobs.record")(lambda: None)


class TestUniqueKey:
    def test_second_enqueue_returns_the_live_job(self) -> None:
        first = jobs.record.using(unique_key="sync-42").enqueue("a")
        second = jobs.record.using(unique_key="sync-42").enqueue("b")
        assert second.pk == first.pk
        assert Job.objects.count() == 1

    def test_a_finished_job_frees_its_key(self) -> None:
        first = jobs.record.using(unique_key="sync-42").enqueue("a")
        Job.objects.filter(pk=first.pk).update(status=JobStatus.SUCCEEDED, finished_at=Now())
        second = jobs.record.using(unique_key="sync-42").enqueue("b")
        assert second.pk != first.pk

    def test_inside_an_outer_transaction(self) -> None:
        with transaction.atomic():
            first = jobs.record.using(unique_key="k").enqueue("a")
            assert jobs.record.using(unique_key="k").enqueue("b").pk == first.pk


@pytest.mark.django_db(transaction=True)
def test_concurrent_unique_enqueues_make_one_job() -> None:
    """Eight threads, eight connections, one key: exactly one row, everyone gets its id."""
    barrier = threading.Barrier(8, timeout=20)
    results: list[int] = []
    errors: list[BaseException] = []

    def enqueue() -> None:
        try:
            barrier.wait()
            results.append(jobs.record.using(unique_key="race").enqueue("x").pk)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=enqueue) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert Job.objects.filter(unique_key="race").count() == 1
    assert set(results) == {Job.objects.get(unique_key="race").pk}


class TestBulk:
    def test_bulk_enqueue_inserts_all(self) -> None:
        rows = jobs.record.bulk_enqueue([((f"k{i}",), {}) for i in range(50)])
        assert len(rows) == 50
        assert all(row.pk for row in rows)
        assert Job.objects.count() == 50

    def test_one_bad_call_writes_nothing(self) -> None:
        with pytest.raises(InvalidJob, match="positional argument 0"):
            jobs.record.bulk_enqueue([(("ok",), {}), ((NotJson(),), {})])
        assert Job.objects.count() == 0

    def test_bulk_refuses_unique_keys(self) -> None:
        with pytest.raises(InvalidJob, match="bulk_enqueue does not take unique_key"):
            jobs.record.using(unique_key="k").bulk_enqueue([(("a",), {})])

    def test_empty_bulk_is_a_no_op(self) -> None:
        assert jobs.record.bulk_enqueue([]) == []


def test_database_constraints_back_the_invariants() -> None:
    from django.db import IntegrityError

    row = jobs.record.enqueue("x")
    for change in ({"attempts": 4}, {"priority": 500}, {"status": "running"}, {"status": "weird"}):
        with pytest.raises(IntegrityError), transaction.atomic():
            Job.objects.filter(pk=row.pk).update(**change)
