"""Step definitions for outages.feature: in this process, on the real database and its clock.

Jobs run through ``django_jobretry.testing.run_jobs``, which records each
outcome with the worker's recorder: failures are counted towards the
breaker by the same code a worker runs. The breaker moves by its heartbeat
duty (``breakers.beat``), called by the steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.db.models.functions import Now
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry import RetryPolicy, Snooze, job
from django_jobretry.holds import breakers, pauses
from django_jobretry.jobs import claim
from django_jobretry.jobs.claimed import release
from django_jobretry.models import Circuit, CircuitState, DeadLetter, Job, JobStatus
from django_jobretry.testing import run_jobs

pytestmark = pytest.mark.django_db

scenarios("outages.feature")

#: Fast retries, a breaker of three failures: the scenarios count attempts, not seconds.
PARTNER = RetryPolicy(
    max_attempts=10, base_delay=0.001, max_delay=0.001, jitter=0, circuit={"failures": 3, "cooldown": 600}
)
UP = {"partner": False}


@job(policy=PARTNER)
def sync_order(n: int) -> None:
    if not UP["partner"]:
        raise ConnectionError(f"partner down ({n})")


@job(policy=RetryPolicy(max_attempts=3, max_snoozes=2))
def wait_for_upload() -> None:
    raise Snooze(60)


@dataclass
class Story:
    ids: list[int] = field(default_factory=list)


@pytest.fixture
def story() -> Story:
    UP["partner"] = False
    return Story()


def task_jobs(story: Story) -> list[Job]:
    return list(Job.objects.filter(pk__in=story.ids).order_by("pk"))


@given(parsers.parse("{count:d} jobs of a task whose partner is down"))
@given(parsers.parse("{count:d} jobs of a task whose partner is down, behind a breaker of 3 failures"))
def enqueued(story: Story, count: int) -> None:
    story.ids = [sync_order.enqueue(n).id for n in range(count)]


@given("an operator pauses the task")
def paused() -> None:
    pauses.pause(task=sync_order.name, actor="alice", reason="partner down")


@given("a job that snoozes, under a budget of 2 snoozes")
def snoozer(story: Story) -> None:
    story.ids = [wait_for_upload.enqueue().id]


@when("the due jobs are run")
def run_due() -> None:
    run_jobs()


@when("every job is run")
def run_all() -> None:
    run_jobs(include_scheduled=True)


@when("the partner is back and the operator resumes the task")
def resumed() -> None:
    UP["partner"] = True
    assert pauses.resume(task=sync_order.name, actor="alice") is not None


@when("the cooldown ends and the partner is back")
def cooldown_over() -> None:
    UP["partner"] = True
    Circuit.objects.update(open_until=Now() - timedelta(seconds=1))
    breakers.beat()


@when("the breaker's next beat comes")
def next_beat() -> None:
    breakers.beat()


@when(parsers.parse("it is run {times:d} times"))
def run_times(story: Story, times: int) -> None:
    for _ in range(times):
        run_jobs()
        Job.objects.filter(pk__in=story.ids).update(run_at=Now())


@then("no job of the task has started")
def none_started(story: Story) -> None:
    assert [(j.status, j.attempts) for j in task_jobs(story)] == [(JobStatus.READY, 0)] * len(story.ids)


@then("every job of the task succeeded at its first attempt")
def first_attempt(story: Story) -> None:
    assert [(j.status, j.attempts) for j in task_jobs(story)] == [(JobStatus.SUCCEEDED, 1)] * len(story.ids)


@then(parsers.parse("the breaker is open after {attempts:d} attempts"))
def breaker_open(story: Story, attempts: int) -> None:
    assert Circuit.objects.get(task_name=sync_order.name).state == CircuitState.OPEN
    assert sum(j.attempts for j in task_jobs(story)) == attempts
    taken = claim.claim("test", 100, 60, None)
    release(taken)
    assert taken == []


@then("the breaker lets exactly one probe through")
def one_probe() -> None:
    row = Circuit.objects.get(task_name=sync_order.name)
    assert row.state == CircuitState.HALF_OPEN
    taken = claim.claim("test", 100, 60, None)
    release(taken)
    assert [claimed.id for claimed in taken] == [row.probe_job_id]


@then("the breaker is closed")
def closed() -> None:
    assert Circuit.objects.get(task_name=sync_order.name).state == CircuitState.CLOSED


@then("every job of the task succeeded and none died")
def all_succeeded(story: Story) -> None:
    assert {j.status for j in task_jobs(story)} == {JobStatus.SUCCEEDED}
    assert not DeadLetter.objects.exists()


@then(parsers.parse("it snoozed {times:d} times without spending an attempt"))
def snoozed(story: Story, times: int) -> None:
    dead = DeadLetter.objects.get(job_id=story.ids[0])
    # Each snooze gave attempt 1 back; the one past the budget is the only attempt counted.
    assert [(entry["ended"], entry["attempt"]) for entry in dead.errors] == [("snoozed", 1)] * (times + 1)
    assert dead.attempts == 1


@then(parsers.parse('it died for "{reason}", the snooze past the budget its only attempt'))
def died_for(story: Story, reason: str) -> None:
    assert DeadLetter.objects.get(job_id=story.ids[0]).reason == reason
