"""A flow's steps as jobs: the fence, holds, results, cancel, and the errors a bad declaration gets."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import pytest
from django.db.models import Q

from django_jobretry.exceptions import InvalidFlow
from django_jobretry.flows import Parents, Step, Workflow, batch, call, chain
from django_jobretry.flows.service import cancel_flow
from django_jobretry.holds import breakers
from django_jobretry.holds.pauses import pause, resume
from django_jobretry.jobs.claimed import succeed
from django_jobretry.models import DeadLetter, Flow, FlowState, FlowStep, Job, JobStatus, OnDead, StepState
from django_jobretry.testing import run_jobs
from tests.attempts import claim_one
from tests.jobs_app import flow_jobs, jobs, unique_jobs
from tests.jobs_app.models import Execution

pytestmark = pytest.mark.django_db


def runs() -> list[str]:
    return list(Execution.objects.order_by("pk").values_list("key", flat=True))


def job_of_step(job: Job) -> Q:
    """The step whose job ``job`` is."""
    return Q(pk=job.flow_step_id)


def two_steps() -> Flow:
    return chain("two", call(flow_jobs.step, "first"), call(flow_jobs.step, "second")).enqueue()


def test_a_waiting_step_is_a_job_no_claim_takes() -> None:
    two_steps()
    assert Job.objects.filter(status=JobStatus.WAITING).count() == 1
    first = claim_one()
    assert first.task_name == flow_jobs.step.name
    assert first.flow_step_id is not None
    assert Job.objects.filter(status=JobStatus.READY).count() == 0


def test_a_success_makes_the_child_ready_in_the_same_statement() -> None:
    two_steps()
    running = claim_one()
    assert succeed([running]) == {running.id}
    child = Job.objects.get(status=JobStatus.READY)
    assert FlowStep.objects.get(job_of_step(child)).state == StepState.LIVE


def test_a_worker_that_lost_its_lease_advances_nothing() -> None:
    two_steps()
    running = claim_one()
    stale = replace(running, token=uuid.uuid4())  # another worker's lease now
    assert succeed([stale]) == set()
    assert Job.objects.filter(status=JobStatus.WAITING).count() == 1
    assert FlowStep.objects.filter(state=StepState.SUCCEEDED).count() == 0


def test_a_chain_runs_in_order() -> None:
    chain("ten", *(call(flow_jobs.step, f"s{n}") for n in range(10))).enqueue()
    run_jobs(include_scheduled=True)
    assert runs() == [f"s{n}" for n in range(10)]


def test_a_batch_calls_back_once_after_the_last_step() -> None:
    row = batch(
        "fifty",
        (call(flow_jobs.step, f"b{n}") for n in range(50)),
        on_success=call(flow_jobs.step, "success"),
        on_complete=call(flow_jobs.step, "complete"),
    ).enqueue()
    run_jobs(include_scheduled=True)
    order = runs()
    assert sorted(order[:50]) == sorted(f"b{n}" for n in range(50))
    assert sorted(order[50:]) == ["complete", "success"]
    assert Flow.objects.get(pk=row.pk).state == FlowState.COMPLETED


def test_a_paused_task_holds_a_ready_step_without_spending_its_attempt() -> None:
    two_steps()
    pause(task=flow_jobs.step.name, actor="ops")
    assert run_jobs().total == 0
    assert Job.objects.get(status=JobStatus.READY).attempts == 0
    resume(task=flow_jobs.step.name, actor="ops")
    run_jobs(include_scheduled=True)
    assert runs() == ["first", "second"]


def test_an_open_breaker_holds_a_ready_step_without_spending_its_attempt() -> None:
    two_steps()
    breakers.hold_task(flow_jobs.step.name, timedelta(minutes=5), None, job_id=0)
    assert run_jobs().total == 0
    assert Job.objects.get(status=JobStatus.READY).attempts == 0
    assert breakers.close(flow_jobs.step.name, actor="ops")
    run_jobs(include_scheduled=True)
    assert runs() == ["first", "second"]


def test_a_step_reads_its_parents_results() -> None:
    flow = Workflow("results")
    a = flow.add(flow_jobs.step, "a", name="a")
    b = flow.add(flow_jobs.step, "b", name="b")
    flow.add(flow_jobs.gather, "g", after=[a, b], results=True, name="g")
    flow.enqueue()
    run_jobs(include_scheduled=True)
    assert Job.objects.get(flow_step__name="g").return_value == {"a": "a", "b": "b"}


def test_a_result_a_child_needs_but_json_cannot_hold_fails_the_step_fatally() -> None:
    flow = Workflow("unkeepable")
    parent = flow.add(flow_jobs.unkeepable, "u", name="u")
    flow.add(flow_jobs.gather, "g", after=[parent], results=True, name="g")
    flow.enqueue()
    run_jobs(include_scheduled=True)
    dead = DeadLetter.objects.get(flow_step__name="u")
    assert dead.reason == "fatal"
    assert "results=True" in dead.last_error
    assert Job.objects.get(flow_step__name="g").status == JobStatus.WAITING


def test_a_result_nobody_reads_is_dropped_when_json_cannot_hold_it() -> None:
    chain("dropped", call(flow_jobs.unkeepable, "u"), call(flow_jobs.step, "after")).enqueue()
    run_jobs(include_scheduled=True)
    assert runs() == ["u", "after"]


def test_cancel_ends_waiting_and_ready_steps_and_asks_running_ones_to_stop() -> None:
    row = Workflow("cancelled")
    a = row.add(flow_jobs.step, "a", name="a")
    row.add(flow_jobs.step, "b", name="b")
    row.add(flow_jobs.step, "c", after=[a], name="c")
    flow = row.enqueue()
    running = claim_one()
    done = cancel_flow(flow.pk, "ops")
    assert done is not None
    assert (done.cancelled, done.stopping) == (2, 1)
    assert Job.objects.get().cancel_requested_by == "ops"
    assert Job.objects.get().pk == running.id
    assert Flow.objects.get(pk=flow.pk).state == FlowState.CANCELLED
    assert cancel_flow(flow.pk, "ops") is None


def _twice() -> None:
    flow = Workflow("x")
    flow.on_success(flow_jobs.step, "s")
    flow.on_success(flow_jobs.step, "t")


def _named_twice() -> None:
    flow = Workflow("x")
    flow.add(flow_jobs.step, "a", name="same")
    flow.add(flow_jobs.step, "b", name="same")


def _after(parents: Callable[[Step], Parents], on_dead: str = OnDead.BLOCK) -> None:
    """A second step whose ``after=`` is ``parents(first step)``."""
    flow = Workflow("x")
    first = flow.add(flow_jobs.step, "a", name="first")
    flow.add(flow_jobs.step, "b", after=parents(first), on_dead=on_dead)


def _key_held_by_a_job() -> None:
    unique_jobs.receipt.enqueue(7)
    _step_of(unique_jobs.receipt, 7)


def _key_twice() -> None:
    flow = Workflow("x")
    flow.add(unique_jobs.receipt, 8)
    flow.add(unique_jobs.receipt, 8)
    flow.enqueue()


def _step_of(task: object, argument: object) -> None:
    flow = Workflow("x")
    flow.add(jobs.record, "fine")
    flow.add(task, argument, name="step")
    flow.enqueue()


def test_a_waiting_step_holds_its_unique_key_until_it_ends() -> None:
    chain("keyed", call(flow_jobs.step, "first"), call(unique_jobs.receipt, 9)).enqueue()
    holder = Job.objects.get(status=JobStatus.WAITING)
    assert holder.unique_key is not None
    again = unique_jobs.receipt.enqueue(9)
    assert again.deduplicated
    assert again.pk == holder.pk
    run_jobs(include_scheduled=True)
    assert Job.objects.get(pk=holder.pk).status == JobStatus.SUCCEEDED
    assert not unique_jobs.receipt.enqueue(9).deduplicated  # ended: the key is free again


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (lambda: Workflow(""), "non-empty string"),
        (lambda: Workflow("x").enqueue(), "has no steps"),
        (
            lambda: Workflow("x").add(flow_jobs.step, "a", after=[Workflow("y").add(flow_jobs.step, "b")]),
            "after=",
        ),
        (lambda: Workflow("x").add(flow_jobs.step, "a", on_dead="maybe"), "on_dead must be one of"),
        # A mapping's rules are its own, yet a misspelt on_dead beside it is refused too.
        (lambda: _after(lambda first: {first: OnDead.RUN}, on_dead="maybe"), "not 'maybe'"),
        (lambda: _after(lambda first: {first: "maybe"}), "on_dead must be one of .*not 'maybe'"),
        (lambda: _after(lambda first: [first, first]), "step 'first' is named twice in after="),
        (_twice, "at most one"),
        (_named_twice, "unique non-empty name"),
        (_key_held_by_a_job, "is held by job"),
        (_key_twice, "have the same unique key"),
        (lambda: _step_of(flow_jobs.step, object()), "step 'step' of flow 'x'"),
        (lambda: _step_of(print, 1), "neither an @job task"),
    ],
)
def test_a_bad_declaration_is_refused_by_name_and_stores_nothing(
    declare: Callable[[], object], message: str
) -> None:
    with pytest.raises(InvalidFlow, match=message):
        declare()
    assert not Flow.objects.exists()
    assert not Job.objects.filter(flow_step__isnull=False).exists()
