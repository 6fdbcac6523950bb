"""Steps of async_jobs.feature: a real burst worker runs tests/jobs_app/async_jobs.py's coroutines.

The jobs write their start and end times to the LedgerRun table, so what ran
at once, and in which process, is read from the database afterwards.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

import pytest
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry.models import Job, JobStatus
from tests.jobs_app import async_jobs
from tests.jobs_app.async_jobs import max_in_flight
from tests.jobs_app.models import Execution, LedgerRun
from tests.processes import Workers, finish, spawn

pytestmark = pytest.mark.django_db(transaction=True)

scenarios("async_jobs.feature")

KEY = "feature"


@dataclass
class Run:
    """The scenario's jobs and the worker that ran them."""

    job_ids: list[int] = field(default_factory=list)
    pid: int = 0


@pytest.fixture
def run() -> Run:
    return Run()


@given(parsers.parse("{count:d} async jobs that each await {seconds:f} s"))
def many(run: Run, count: int, seconds: float) -> None:
    run.job_ids = [job.pk for job in async_jobs.awaits.bulk_enqueue([((KEY, seconds), {})] * count)]


@given("an async job whose first attempt awaits past its 1 s time limit")
def late(run: Run) -> None:
    run.job_ids = [async_jobs.hangs_on_first_attempt.enqueue(KEY).pk]


@when(parsers.parse("one worker runs them with --async-concurrency {bound:d}"))
def one_worker(run: Run, workers: Workers, bound: int) -> None:
    process: subprocess.Popen[str] = spawn(workers, "--burst", "--async-concurrency", str(bound))
    code, output = finish(process, timeout=120)
    assert code == 0, output
    run.pid = process.pid


@then(parsers.parse("all {count:d} jobs have succeeded"))
def all_succeeded(run: Run, count: int) -> None:
    assert Job.objects.filter(pk__in=run.job_ids, status=JobStatus.SUCCEEDED).count() == count


@then(parsers.parse("{bound:d} of them were in flight at once, in that one process"))
def at_once(run: Run, bound: int) -> None:
    assert max_in_flight(KEY) == bound
    assert list(LedgerRun.objects.filter(key=KEY).values_list("pid", flat=True).distinct()) == [run.pid]


@then(parsers.parse("the job has succeeded on its attempt {attempt:d}"))
def succeeded_on(run: Run, attempt: int) -> None:
    job = Job.objects.get(pk=run.job_ids[0])
    assert (job.status, job.attempts) == (JobStatus.SUCCEEDED, attempt)


@then(parsers.parse('its first attempt ended as "{ended}" and its coroutine saw the cancel'))
def cancelled(run: Run, ended: str) -> None:
    job = Job.objects.get(pk=run.job_ids[0])
    assert [(entry["attempt"], entry["ended"]) for entry in job.errors] == [(1, ended)]
    marks = Execution.objects.filter(key__startswith=f"{KEY}:").order_by("id").values_list("key", "attempt")
    assert list(marks) == [(f"{KEY}:started", 1), (f"{KEY}:cancelled", 1)]
