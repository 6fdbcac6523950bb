"""A flow's failure rules on real rows: a dead step blocks, a requeue resumes, a discard cancels.

The acceptance's diamond A -> (B, C) -> D with B failing fatally, run by
``testing.run_jobs`` (the worker's own claim, run and record, in this
thread): the flow is blocked and D never runs; a repair of B's arguments
resumes it and every callback runs once; a discard instead cancels D and
the success callback, and the completion callback runs once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from django_jobretry import deadletters, signals
from django_jobretry.deadletters.repair import digest, repair
from django_jobretry.flows import Workflow
from django_jobretry.flows.service import cancelled_by_discard
from django_jobretry.jobs.retention import prune_dead_letters
from django_jobretry.models import DeadLetter, Flow, FlowState, FlowStep, Job, JobStatus, StepState
from django_jobretry.testing import run_jobs
from tests.jobs_app import flow_jobs
from tests.jobs_app.models import Execution

pytestmark = pytest.mark.django_db


def runs() -> list[str]:
    return list(Execution.objects.order_by("pk").values_list("key", flat=True))


def states(flow: Flow) -> dict[str, str]:
    return dict(FlowStep.objects.filter(flow=flow).values_list("name", "state"))


def diamond(*, on_dead: str = "block") -> Flow:
    flow = Workflow("order-4007")
    a = flow.add(flow_jobs.step, "A", name="A")
    b = flow.add(flow_jobs.step_unless, "B", True, after=[a], name="B")
    c = flow.add(flow_jobs.step, "C", after=[a], name="C")
    flow.add(flow_jobs.step, "D", after=[b, c], name="D", on_dead=on_dead)
    flow.on_success(flow_jobs.step, "success")
    flow.on_complete(flow_jobs.step, "complete")
    flow.on_death(flow_jobs.step, "death")
    return flow.enqueue()


def blocked_diamond() -> tuple[Flow, DeadLetter]:
    flow = diamond()
    run_jobs(include_scheduled=True)
    return Flow.objects.get(pk=flow.pk), DeadLetter.objects.get(flow_step__name="B")


def test_a_dead_step_blocks_its_flow_and_its_descendants_wait() -> None:
    flow, dead = blocked_diamond()
    assert (flow.state, flow.blocked_by) == (FlowState.BLOCKED, dead.pk)
    assert flow.blocked_at is not None
    assert sorted(runs()) == ["A", "C", "death"]
    assert states(flow) == {
        "A": StepState.SUCCEEDED,
        "B": StepState.DEAD,
        "C": StepState.SUCCEEDED,
        "D": StepState.WAITING,
        "step": StepState.WAITING,
        "step-2": StepState.WAITING,
        "step-3": StepState.SUCCEEDED,
    }
    assert Job.objects.get(flow_step__name="D").status == JobStatus.WAITING
    assert Job.objects.get(flow_step__name="C").return_value == "C"


def test_a_repair_and_requeue_resumes_the_flow_and_each_callback_runs_once() -> None:
    flow, dead = blocked_diamond()
    repair(dead.pk, args=["B", False], kwargs={}, seen=digest(dead.args, dead.kwargs), actor="ops")
    assert Flow.objects.get(pk=flow.pk).state == FlowState.RUNNING
    run_jobs(include_scheduled=True)
    assert sorted(runs()) == ["A", "B", "C", "D", "complete", "death", "success"]
    flow.refresh_from_db()
    assert (flow.state, flow.blocked_by, flow.open_steps) == (FlowState.COMPLETED, None, 0)
    assert flow.finished_at is not None


def test_d_runs_after_both_parents_and_the_success_callback_last() -> None:
    _, dead = blocked_diamond()
    repair(dead.pk, args=["B", False], kwargs={}, seen=digest(dead.args, dead.kwargs), actor="ops")
    run_jobs(include_scheduled=True)
    order = runs()
    assert order.index("D") > max(order.index("B"), order.index("C"))
    assert order.index("success") > order.index("D")


def test_a_discard_cancels_the_descendants_and_the_completion_callback_runs_once() -> None:
    flow, dead = blocked_diamond()
    assert cancelled_by_discard([dead.pk]) == {dead.pk: ["D", "step"]}
    deadletters.discard(dead.pk, actor="ops")
    run_jobs(include_scheduled=True)
    assert sorted(runs()) == ["A", "C", "complete", "death"]
    flow.refresh_from_db()
    assert (flow.state, flow.blocked_by, flow.open_steps) == (FlowState.COMPLETED, None, 0)
    assert states(flow)["B"] == StepState.DISCARDED
    assert states(flow)["D"] == states(flow)["step"] == StepState.CANCELLED
    assert not Job.objects.filter(flow_step__name__in=["D", "step"]).exists()


def test_a_child_that_runs_anyway_runs_beside_a_dead_parent() -> None:
    flow = diamond(on_dead="run")
    run_jobs(include_scheduled=True)
    assert sorted(runs()) == ["A", "C", "D", "complete", "death"]
    assert Flow.objects.get(pk=flow.pk).state == FlowState.BLOCKED


def test_a_child_that_skips_is_cancelled_with_its_own_children() -> None:
    flow = diamond(on_dead="skip")
    run_jobs(include_scheduled=True)
    assert sorted(runs()) == ["A", "C", "complete", "death"]
    assert states(Flow.objects.get(pk=flow.pk))["D"] == StepState.CANCELLED


def test_a_requeue_after_the_completion_callback_runs_the_step_not_the_callback_again() -> None:
    flow = Workflow("leaf")
    flow.add(flow_jobs.step, "ok", name="ok")
    flow.add(flow_jobs.step_unless, "leaf", True, name="leaf")
    flow.on_complete(flow_jobs.step, "complete")
    flow.on_success(flow_jobs.step, "success")
    row = flow.enqueue()
    run_jobs(include_scheduled=True)
    assert sorted(runs()) == ["complete", "ok"]
    dead = DeadLetter.objects.get(flow_step__name="leaf")
    repair(dead.pk, args=["leaf", False], kwargs={}, seen=digest(dead.args, dead.kwargs), actor="ops")
    run_jobs(include_scheduled=True)
    assert sorted(runs()) == ["complete", "leaf", "ok", "success"]
    assert Flow.objects.get(pk=row.pk).state == FlowState.COMPLETED


def test_pruning_a_dead_step_is_a_discard_of_it() -> None:
    flow, dead = blocked_diamond()
    DeadLetter.objects.filter(pk=dead.pk).update(dead_at=dead.dead_at - timedelta(days=30))
    assert sum(prune_dead_letters(timedelta(days=7)).values()) == 1
    run_jobs(include_scheduled=True)
    flow.refresh_from_db()
    assert (flow.state, flow.blocked_by) == (FlowState.COMPLETED, None)
    assert states(flow)["B"] == StepState.DISCARDED
    assert sorted(runs()) == ["A", "C", "complete", "death"]


def test_the_worker_signals_a_flow_blocked_once_and_completed_once() -> None:
    heard: list[tuple[str, int, int | None]] = []

    def blocked(**kwargs: Any) -> None:
        heard.append(("blocked", kwargs["flow_id"], kwargs["dead_letter_id"]))

    def completed(**kwargs: Any) -> None:
        heard.append(("completed", kwargs["flow_id"], kwargs["dead_letter_id"]))

    signals.flow_blocked.connect(blocked)
    signals.flow_completed.connect(completed)
    try:
        flow, dead = blocked_diamond()
        repair(dead.pk, args=["B", False], kwargs={}, seen=digest(dead.args, dead.kwargs), actor="ops")
        run_jobs(include_scheduled=True)
    finally:
        signals.flow_blocked.disconnect(blocked)
        signals.flow_completed.disconnect(completed)
    assert heard == [("blocked", flow.pk, dead.pk), ("completed", flow.pk, None)]
