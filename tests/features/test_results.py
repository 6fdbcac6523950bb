"""Step definitions for results.feature: enqueues, run_jobs() (the worker's handler and recorder), reads."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry import deadletters
from django_jobretry.exceptions import NoResult
from django_jobretry.models import DeadLetter, Job
from django_jobretry.testing import run_jobs
from tests.jobs_app import result_jobs
from tests.jobs_app.models import Execution

pytestmark = pytest.mark.django_db

scenarios("results.feature")


@dataclass
class Enqueued:
    """The jobs the scenario's enqueues returned, in order."""

    jobs: list[Job] = field(default_factory=list)

    @property
    def first(self) -> Job:
        return self.jobs[0]

    def dead_letter(self) -> DeadLetter:
        return DeadLetter.objects.get(job_id=self.first.pk)


@pytest.fixture
def enqueued() -> Enqueued:
    return Enqueued()


@given("the total of an order priced 3, 4 and 5 is enqueued by a task that keeps its result")
def total_kept(enqueued: Enqueued) -> None:
    enqueued.jobs.append(result_jobs.total.enqueue([3, 4, 5]))


@given("the same total is enqueued by a task that keeps none")
def total_not_kept(enqueued: Enqueued) -> None:
    enqueued.jobs.append(result_jobs.total_not_kept.enqueue([3, 4, 5]))


@given(parsers.parse("a task that keeps its result is enqueued to return {size:d} characters"))
def too_large(enqueued: Enqueued, size: int) -> None:
    enqueued.jobs.append(result_jobs.text_of.enqueue(size))


@given(parsers.parse('a task that keeps its result is enqueued to die on its first run, for "{key}"'))
def dies_once(enqueued: Enqueued, key: str) -> None:
    enqueued.jobs.append(result_jobs.fatal_once.enqueue(key))


@when("the worker runs the due jobs")
def worker_runs() -> None:
    run_jobs()


@when("the operator requeues its dead letter")
def requeue(enqueued: Enqueued) -> None:
    assert isinstance(deadletters.requeue(enqueued.dead_letter().pk), Job)


@then(parsers.parse("the first job's result is a total of {total:d} for {items:d} items"))
def first_result(enqueued: Enqueued, total: int, items: int) -> None:
    assert enqueued.first.result() == {"total": total, "items": items}


@then("reading the second job's result says its task keeps none")
def second_keeps_none(enqueued: Enqueued) -> None:
    with pytest.raises(NoResult, match="succeeded without keeping its result"):
        enqueued.jobs[1].result()


@then(parsers.parse("it ran {count:d} time and is a fatal dead letter"))
def ran_and_died(enqueued: Enqueued, count: int) -> None:
    assert Execution.objects.filter(key="text_of").count() == count
    dead = enqueued.dead_letter()
    assert (dead.reason, dead.attempts) == ("fatal", count)


@then(parsers.parse("its last error names the task, {size:d} bytes as JSON and the limit of {limit:d}"))
def last_error(enqueued: Enqueued, size: int, limit: int) -> None:
    error = enqueued.dead_letter().last_error
    assert f"task {result_jobs.text_of.name!r} keeps its result (keep_result=True)" in error
    assert f"is {size} bytes as JSON; the limit is {limit} (JOBRETRY['MAX_ARGS_BYTES'])" in error


@then("reading its result says it is a dead letter")
def result_of_dead(enqueued: Enqueued) -> None:
    with pytest.raises(NoResult, match=f"is dead letter {enqueued.dead_letter().pk}"):
        enqueued.first.result()


@then(parsers.parse('the result read by the first job is "{value}"'))
def result_after_requeue(enqueued: Enqueued, value: str) -> None:
    assert enqueued.first.result() == value
