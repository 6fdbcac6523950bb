"""The sub-states no column stores (models/job_states.py), each found by its queryset and no other job.

One job is brought into each sub-state by the code that does it in
production: a pause, a breaker opened by ``CircuitOpen`` and a heartbeat's
park, a limited task's enqueue, ``raise Snooze``, an operator's cancel of a
running job. The plain ready job, the retrying job, the running job no one cancelled
and a limited job not due yet are the negative controls: they are in
none of them. A job due behind the open breaker is held but not parked
(the next heartbeat parks it).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import QuerySet

from django_jobretry import CircuitOpen, RetryPolicy, Snooze, job
from django_jobretry.holds import breakers, pauses
from django_jobretry.jobs import claim, recovery
from django_jobretry.models import Circuit, CircuitState, Job, JobStatus
from django_jobretry.testing import run_jobs
from tests.jobs_app.limited_jobs import limited_noop

pytestmark = pytest.mark.django_db

BREAKER = RetryPolicy(max_attempts=5, circuit={"failures": 3, "cooldown": 600, "max_cooldown": 3600})
LATER = RetryPolicy(max_attempts=5, base_delay=600, max_delay=600, jitter=0)


@job(name="tests.states.paused")
def paused_task() -> None:
    """Never runs: its task is paused before any claim."""


@job(name="tests.states.outage", policy=BREAKER)
def outage() -> None:
    raise CircuitOpen(for_=timedelta(minutes=10))


@job(name="tests.states.not_yet", policy=RetryPolicy(max_attempts=3, max_snoozes=5))
def not_yet() -> None:
    raise Snooze(600)


@job(name="tests.states.flaky", policy=LATER)
def flaky() -> None:
    raise ConnectionError("down")


@job(name="tests.states.plain")
def plain() -> None:
    """Stays ready: its runs are claimed by name only, never by this test."""


def ids(queryset: QuerySet[Job]) -> set[int]:
    return set(queryset.values_list("pk", flat=True))


@pytest.fixture
def jobs() -> dict[str, int]:
    """One job in each sub-state, and the negative controls, by what each is."""
    snoozed, retrying = not_yet.enqueue(), flaky.enqueue()
    behind_breaker = outage.enqueue()
    run_jobs()  # only these three exist yet
    assert Circuit.objects.get(task_name=outage.name).state == CircuitState.OPEN
    breakers.beat()  # parks the breaker's jobs at its end
    due_behind_breaker = outage.enqueue()  # held, but parked only by the next heartbeat

    paused = paused_task.enqueue()
    assert pauses.pause(task=paused_task.name, actor="alice", reason="maintenance") is True
    waiting = limited_noop.enqueue()
    limited_later = limited_noop.using(run_after=timedelta(hours=1)).enqueue()  # has a lane, not due
    ready, cancelled, running = plain.enqueue(), plain.enqueue(), plain.enqueue()
    claimed = claim.claim("test", 2, 600, None, task_names=[plain.name], skip=[ready.id])
    assert {job.id for job in claimed} == {cancelled.id, running.id}
    assert recovery.cancel_jobs([cancelled.id], actor="bob").stopping == [cancelled.id]
    return {
        "paused": paused.id,
        "parked": behind_breaker.id,
        "due_behind_breaker": due_behind_breaker.id,
        "waiting": waiting.id,
        "snoozed": snoozed.id,
        "cancelled": cancelled.id,
        "ready": ready.id,
        "limited_later": limited_later.id,
        "retrying": retrying.id,
        "running": running.id,
    }


def test_each_sub_state_finds_exactly_its_jobs(jobs: dict[str, int]) -> None:
    assert ids(Job.objects.held()) == {jobs["paused"], jobs["parked"], jobs["due_behind_breaker"]}
    assert ids(Job.objects.parked()) == {jobs["parked"]}
    assert ids(Job.objects.waiting_for_slot()) == {jobs["waiting"]}
    assert ids(Job.objects.snoozed()) == {jobs["snoozed"]}
    assert ids(Job.objects.cancel_requested()) == {jobs["cancelled"]}


def test_the_negative_controls_are_in_no_sub_state(jobs: dict[str, int]) -> None:
    controls = {jobs["ready"], jobs["retrying"], jobs["running"], jobs["limited_later"]}
    assert Job.objects.get(pk=jobs["retrying"]).status == JobStatus.READY
    assert Job.objects.get(pk=jobs["running"]).status == JobStatus.RUNNING
    for sub_state in ("held", "parked", "waiting_for_slot", "snoozed", "cancel_requested"):
        assert not ids(getattr(Job.objects, sub_state)()) & controls, sub_state


def test_the_rows_are_what_each_sub_state_says(jobs: dict[str, int]) -> None:
    """The definitions hold on the rows: parked at the breaker's end, a lane, a snooze, a request."""
    breaker = Circuit.objects.get(task_name=outage.name)
    assert Job.objects.get(pk=jobs["parked"]).run_at == breaker.open_until
    assert Job.objects.get(pk=jobs["waiting"]).limit_lane is not None
    snoozed = Job.objects.get(pk=jobs["snoozed"])
    assert (snoozed.snoozes, snoozed.attempts, snoozed.errors[-1]["ended"]) == (1, 0, "snoozed")
    assert Job.objects.get(pk=jobs["cancelled"]).cancel_requested_by == "bob"


def test_a_resume_and_a_closed_breaker_end_the_holds(jobs: dict[str, int]) -> None:
    pauses.resume(task=paused_task.name, actor="alice")
    assert ids(Job.objects.held()) == {jobs["parked"], jobs["due_behind_breaker"]}
    breakers.close(outage.name, actor="alice")
    assert ids(Job.objects.held()) == set()
    assert ids(Job.objects.parked()) == set()


def test_a_snoozed_job_that_then_failed_is_retrying_not_snoozed() -> None:
    """Snoozed is about its last attempt: ``snoozes`` alone would keep it snoozed forever."""
    again = not_yet.enqueue()
    run_jobs()
    assert ids(Job.objects.snoozed()) == {again.id}
    Job.objects.filter(pk=again.id).update(errors=[*Job.objects.get(pk=again.id).errors, {"ended": "error"}])
    assert ids(Job.objects.snoozed()) == set()
    assert Job.objects.get(pk=again.id).snoozes == 1
