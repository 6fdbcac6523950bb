"""django.tasks' enqueue says whether it was deduplicated (issue 36): ``result.deduplicated``.

A ``TaskResult`` is a frozen dataclass with slots, so JobRetryBackend's
results are a subclass carrying the flag; Django's ``task_enqueued`` stays
unsent for a deduplicated enqueue and our ``job_deduplicated`` is sent
instead. Tasks: tests/jobs_app/task_options.py. Django 6.1+ (``@task``
passes ``unique_args`` on from 6.1): skipped before the imports.
"""

from __future__ import annotations

import django
import pytest

if django.VERSION < (6, 1):
    pytest.skip("@task(unique_*=...) needs Django 6.1", allow_module_level=True)

from collections.abc import Iterator
from typing import Any

from asgiref.sync import async_to_sync
from django.tasks import TaskResultStatus
from django.tasks.signals import task_enqueued

from django_jobretry import signals
from django_jobretry.backends import JobRetryTaskResult
from django_jobretry.exceptions import JobConflict
from django_jobretry.models import Job
from django_jobretry.testing import run_jobs
from tests.jobs_app import task_options

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent() -> Iterator[list[tuple[str, Any]]]:
    """``task_enqueued`` (its result id) and ``job_deduplicated`` (its job id), in the order sent."""
    received: list[tuple[str, Any]] = []

    def enqueued(sender: Any, task_result: Any, **kwargs: Any) -> None:
        received.append(("task_enqueued", task_result.id))

    def deduplicated(sender: Any, job_id: int, unique_key: str, **kwargs: Any) -> None:
        received.append(("job_deduplicated", str(job_id)))

    task_enqueued.connect(enqueued, dispatch_uid="test-told-enqueued")
    signals.job_deduplicated.connect(deduplicated, dispatch_uid="test-told-deduplicated")
    yield received
    task_enqueued.disconnect(dispatch_uid="test-told-enqueued")
    signals.job_deduplicated.disconnect(dispatch_uid="test-told-deduplicated")


def test_a_fresh_enqueue_is_not_deduplicated(sent: list[tuple[str, Any]]) -> None:
    result = task_options.charge.enqueue(7, amount=1)
    assert isinstance(result, JobRetryTaskResult)
    assert result.deduplicated is False
    assert sent == [("task_enqueued", result.id)]


def test_a_second_enqueue_is_deduplicated_names_the_holder_and_equals_it(sent: list[tuple[str, Any]]) -> None:
    first = task_options.charge.enqueue(7, amount=1)
    again = task_options.charge.enqueue(7, amount=2)
    assert (again.deduplicated, again.id, again.kwargs) == (True, first.id, {"amount": 1})
    assert again == first == task_options.charge.get_result(first.id), "the flag is not part of equality"
    assert task_options.charge.get_result(first.id).deduplicated is False
    assert sent == [("task_enqueued", first.id), ("job_deduplicated", first.id)]


def test_a_task_that_succeeded_within_unique_for_comes_back_deduplicated(sent: list[tuple[str, Any]]) -> None:
    first = task_options.nightly_report.enqueue("monday")
    assert run_jobs().succeeded == 1
    again = task_options.nightly_report.enqueue("tuesday")
    assert (again.deduplicated, again.id, again.status) == (True, first.id, TaskResultStatus.SUCCESSFUL)
    assert again.return_value == "monday", "the holder's result, not the new call's"
    assert sent == [("task_enqueued", first.id), ("job_deduplicated", first.id)]


def test_replace_is_deduplicated_with_the_new_arguments(sent: list[tuple[str, Any]]) -> None:
    first = task_options.charge_latest.enqueue(7, amount=1)
    latest = task_options.charge_latest.enqueue(7, amount=2)
    assert (latest.deduplicated, latest.id, latest.kwargs) == (True, first.id, {"amount": 2})
    assert sent == [("task_enqueued", first.id), ("job_deduplicated", first.id)]


def test_raise_raises_and_sends_no_signal(sent: list[tuple[str, Any]]) -> None:
    first = task_options.charge_once.enqueue(7)
    with pytest.raises(JobConflict):
        task_options.charge_once.enqueue(7, amount=2)
    assert sent == [("task_enqueued", first.id)]
    assert Job.objects.count() == 1


def test_aenqueue_says_it_too(sent: list[tuple[str, Any]]) -> None:
    first = async_to_sync(task_options.charge.aenqueue)(9)
    again = async_to_sync(task_options.charge.aenqueue)(9)
    assert (first.deduplicated, again.deduplicated, again.id) == (False, True, first.id)
    assert sent == [("task_enqueued", first.id), ("job_deduplicated", first.id)]
