"""django.tasks tasks under `runworker --pool process`: the result crosses the pipe from the child.

Real worker processes against real PostgreSQL, with hard deadlines (Django 6+ only).
"""

from __future__ import annotations

import pytest
from django.tasks import TaskResultStatus

from tests.jobs_app import tasks
from tests.processes import Workers, finish, pids, spawn

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_task_run_in_a_child_process_keeps_its_return_value_and_its_context(workers: Workers) -> None:
    flaky = tasks.flaky.enqueue("pooled", 1)
    counted = tasks.attempts.enqueue("counted", 1)
    unstorable = tasks.returns_a_set.enqueue("unstorable")
    worker = spawn(workers, "--pool", "process", "--concurrency", "2", "--max-jobs", "5")
    code, output = finish(worker, timeout=90)
    assert code == 0, output
    for result in (flaky, counted, unstorable):
        result.refresh()
    assert (flaky.status, flaky.return_value, len(flaky.errors)) == (
        TaskResultStatus.SUCCESSFUL,
        {"key": "pooled", "runs": 2},
        1,
    )
    assert (counted.status, counted.return_value) == (TaskResultStatus.SUCCESSFUL, 2)
    # A value that cannot be stored fails in the child, fatally: one attempt, a clear error.
    assert unstorable.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in unstorable.errors] == [
        "django_jobretry.exceptions.UnstorableResult"
    ]
    assert worker.pid not in pids("pooled")
