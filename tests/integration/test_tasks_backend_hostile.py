"""django.tasks results of hand-edited rows: a time Python cannot hold is read as None (issue 17).

A ``timestamptz`` holds 'infinity', '-infinity' and the year 20000; psycopg
refuses to load them, so reading such a row whole raised DataError from
``get_result()``, and from the worker reading the task's running result
(each attempt failed before the task ran). Django 6+ only (tests/conftest.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.tasks import TaskResultStatus
from django.tasks.signals import task_finished

from django_jobretry import deadletters
from django_jobretry.models import DeadLetter, Job
from tests.inprocess import run_until_settled
from tests.integration.tasks_backend import fail
from tests.jobs_app import tasks
from tests.jobs_app.models import Execution

pytestmark = pytest.mark.django_db

UNHOLDABLE = ["'infinity'", "'-infinity'", "'20000-01-01 00:00+00'", "'0002-01-01 00:00 BC'"]


def set_raw(model: type[Job | DeadLetter], pk: int, assignment: str) -> None:
    """Write what enqueue() never writes, as a hand-edit or a bad restore could."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {model._meta.db_table} SET {assignment} WHERE id = %s", [pk])


@pytest.mark.parametrize("value", UNHOLDABLE)
def test_a_ready_task_whose_run_at_python_cannot_hold_is_still_its_result(value: str) -> None:
    enqueued = tasks.flaky.enqueue("k", 0)
    set_raw(Job, int(enqueued.id), f"run_at = {value}")
    result = tasks.flaky.get_result(enqueued.id)
    assert (result.id, result.status, result.args, result.worker_ids) == (
        enqueued.id,
        TaskResultStatus.READY,
        ["k", 0],
        [],
    )
    assert result.enqueued_at == enqueued.enqueued_at


@pytest.mark.parametrize("value", UNHOLDABLE)
def test_every_time_a_result_reports_reads_as_none_when_python_cannot_hold_it(value: str) -> None:
    enqueued = tasks.flaky.enqueue("k", 0)
    set_raw(Job, int(enqueued.id), f"enqueued_at = {value}, first_attempt_at = {value}, started_at = {value}")
    result = tasks.flaky.get_result(enqueued.id)
    assert (result.enqueued_at, result.started_at, result.last_attempted_at) == (None, None, None)


def test_a_dead_letter_whose_times_python_cannot_hold_is_a_failed_result() -> None:
    enqueued = tasks.always_fails.enqueue("k")
    for owner in ("w1", "w2", "w3"):
        fail(owner, ConnectionResetError(f"reset by {owner}"))
    dead = DeadLetter.objects.get()
    set_raw(
        DeadLetter, dead.pk, "dead_at = 'infinity', enqueued_at = '-infinity', first_attempt_at = 'infinity'"
    )
    result = tasks.always_fails.get_result(enqueued.id)
    assert (result.status, result.worker_ids) == (TaskResultStatus.FAILED, ["w1", "w2", "w3"])
    assert (result.finished_at, result.enqueued_at, result.started_at) == (None, None, None)
    assert result.last_attempted_at is not None  # from the last error entry, which holds a real time
    # An operator still acts on it.
    deadletters.discard(dead.pk, actor="ops")
    assert not DeadLetter.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("keep_signal_handlers")
def test_a_task_whose_run_at_is_minus_infinity_is_just_due_and_runs_once() -> None:
    # Before: claimed (the claim held), but reading its running result raised DataError, so
    # attempt 1 failed before the task ran and the retry (a new run_at) ran it as attempt 2.
    finished: list[Any] = []

    def receive(sender: type, task_result: Any, **kwargs: Any) -> None:
        finished.append((task_result.id, task_result.status))

    task_finished.connect(receive, weak=False)
    try:
        early = tasks.flaky.enqueue("early", 0)
        tasks.flaky.enqueue("innocent", 0)
        set_raw(Job, int(early.id), "run_at = '-infinity'")
        run_until_settled(concurrency=4)
    finally:
        task_finished.disconnect(receive)
    assert sorted(Execution.objects.values_list("key", "attempt")) == [("early", 1), ("innocent", 1)]
    result = tasks.flaky.get_result(early.id)
    assert (result.status, result.return_value, result.errors) == (
        TaskResultStatus.SUCCESSFUL,
        {"key": "early", "runs": 1},
        [],
    )
    assert (early.id, TaskResultStatus.SUCCESSFUL) in finished
