"""Step definitions for task_modules.feature: burst workers with and without JOBRETRY["TASK_MODULES"]."""

from __future__ import annotations

import pytest
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry.models import Job, JobStatus
from tests.processes import finish, spawn_worker
from tests.task_modules import elsewhere

# A subprocess worker must see the rows the test writes: no wrapping transaction.
pytestmark = pytest.mark.django_db(transaction=True)

scenarios("task_modules.feature")


@given(parsers.parse('a job of "{module}" is enqueued'), target_fixture="job")
def enqueued(module: str) -> Job:
    assert module == elsewhere.__name__
    return elsewhere.kept_elsewhere.enqueue("kept")


@when("a burst worker runs without TASK_MODULES")
def burst_worker_without() -> None:
    burst_worker("")


@when(parsers.parse('a burst worker runs with TASK_MODULES "{modules}"'))
def burst_worker(modules: str) -> None:
    env = {"DJANGO_SETTINGS_MODULE": "tests.settings_task_modules", "JOBRETRY_TEST_TASK_MODULES": modules}
    code, output = finish(spawn_worker("--burst", env=env), timeout=60)
    assert code == 0, output


@then(parsers.parse("the job succeeded after {attempts:d} attempt"))
def succeeded(job: Job, attempts: int) -> None:
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.SUCCEEDED, attempts)


@then(parsers.parse("the job is waiting for a retry after {attempts:d} attempt"))
def retrying(job: Job, attempts: int) -> None:
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.READY, attempts)


@then(
    parsers.parse('its error says it is an unknown task, lists "{module}" and names JOBRETRY["TASK_MODULES"]')
)
def unknown_task_error(job: Job, module: str) -> None:
    job.refresh_from_db()
    [entry] = job.errors
    assert entry["ended"] == "unknown_task"
    assert entry["message"].startswith(f"unknown task {job.task_name!r}: not registered in this worker")
    assert "modules imported at start-up: " in entry["message"]
    assert module in entry["message"]
    assert 'add its module to JOBRETRY["TASK_MODULES"]' in entry["message"]
