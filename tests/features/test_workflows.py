"""Step definitions for workflows.feature: the operators' real services on real rows, jobs run in process.

Jobs run through ``django_jobretry.testing.run_jobs(include_scheduled=True)``,
the worker's own claim, run and record in this thread; every step of the
flows records an Execution row (tests/jobs_app/flow_jobs.py), so "ran once"
is counted, and "after" is the order of those rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry import deadletters
from django_jobretry.deadletters.repair import digest, repair
from django_jobretry.flows import Workflow
from django_jobretry.flows.service import Cancelled, cancel_flow, cancelled_by_discard
from django_jobretry.holds import pauses
from django_jobretry.models import (
    DeadLetter,
    Flow,
    FlowState,
    FlowStep,
    Job,
    JobStatus,
    StepRole,
    StepState,
)
from django_jobretry.testing import run_jobs
from tests.jobs_app import flow_jobs
from tests.jobs_app.models import Execution

pytestmark = pytest.mark.django_db

scenarios("workflows.feature")

#: The callbacks' keys in the Execution ledger, by role.
CALLBACKS = {"success": StepRole.ON_SUCCESS, "completion": StepRole.ON_COMPLETE, "death": StepRole.ON_DEATH}


@dataclass
class Story:
    """The flow of one scenario and what the operator was told."""

    flow_id: int = 0
    confirmation: dict[int, list[str]] = field(default_factory=dict)
    cancelled: Cancelled | None = None

    @property
    def flow(self) -> Flow:
        return Flow.objects.get(pk=self.flow_id)

    def step(self, name: str) -> FlowStep:
        return FlowStep.objects.get(flow_id=self.flow_id, name=name)

    def callback(self, kind: str) -> FlowStep:
        return FlowStep.objects.get(flow_id=self.flow_id, role=CALLBACKS[kind])

    def dead_letter(self, name: str) -> DeadLetter:
        return DeadLetter.objects.get(flow_step__flow_id=self.flow_id, flow_step__name=name)


@pytest.fixture
def story() -> Story:
    return Story()


def ledger() -> list[str]:
    """The keys of every run so far, in the order they ran."""
    return list(Execution.objects.order_by("pk").values_list("key", flat=True))


@given("a diamond flow A -> (B, C) -> D whose step B fails fatally")
def diamond(story: Story) -> None:
    flow = Workflow("order-4007")
    a = flow.add(flow_jobs.step, "A", name="A")
    b = flow.add(flow_jobs.step_unless, "B", True, after=[a], name="B")
    c = flow.add(flow_jobs.step, "C", after=[a], name="C")
    flow.add(flow_jobs.step, "D", after=[b, c], name="D")
    flow.on_success(flow_jobs.step, "success")
    flow.on_complete(flow_jobs.step, "completion")
    flow.on_death(flow_jobs.step, "death")
    story.flow_id = flow.enqueue().pk


@given("a flow A -> B whose step B is of a task the operator has paused")
def held_chain(story: Story) -> None:
    flow = Workflow("held")
    a = flow.add(flow_jobs.step, "A", name="A")
    flow.add(flow_jobs.downstream, "B", after=[a], name="B")
    story.flow_id = flow.enqueue().pk
    assert pauses.pause(task=flow_jobs.downstream.name, actor="ops", reason="partner down")


@given("the jobs have run until nothing is due")
@when("the jobs run until nothing is due")
def run_all() -> None:
    run_jobs(include_scheduled=True)


@when("the operator repairs B's arguments and requeues it")
def repair_b(story: Story) -> None:
    dead = story.dead_letter("B")
    repair(dead.pk, args=["B", False], kwargs={}, seen=digest(dead.args, dead.kwargs), actor="ops")


@when("the operator asks to discard B's dead letter")
def ask_discard(story: Story) -> None:
    story.confirmation = cancelled_by_discard([story.dead_letter("B").pk])


@when("the operator discards it")
def discard_b(story: Story) -> None:
    deadletters.discard(story.dead_letter("B").pk, actor="ops")


@when("the operator resumes the task")
def resume(story: Story) -> None:
    ended = pauses.resume(task=flow_jobs.downstream.name, actor="ops")
    assert ended is not None
    assert ended.held == 1


@when("the operator cancels the flow")
def cancel(story: Story) -> None:
    story.cancelled = cancel_flow(story.flow_id, "ops")


@then("the flow is blocked by B's dead letter")
def blocked(story: Story) -> None:
    flow, dead = story.flow, story.dead_letter("B")
    assert (flow.state, flow.blocked_by) == (FlowState.BLOCKED, dead.pk)
    assert (dead.reason, dead.attempts) == ("fatal", 1)
    assert story.step("B").state == StepState.DEAD


@then("D has not run")
def d_waits(story: Story) -> None:
    assert "D" not in ledger()
    assert story.step("D").state == StepState.WAITING
    assert Job.objects.get(flow_step__name="D").status == JobStatus.WAITING


@then("C's result is kept")
def c_kept(story: Story) -> None:
    assert story.step("C").state == StepState.SUCCEEDED
    assert Job.objects.get(flow_step__name="C").return_value == "C"


@then("B ran once, and D ran once after B and C")
def d_after_b_and_c() -> None:
    order = ledger()
    assert [order.count(key) for key in ("B", "C", "D")] == [1, 1, 1]
    assert order.index("D") > max(order.index("B"), order.index("C"))


@then(parsers.parse("the {kind} callback ran exactly once"))
def callback_once(story: Story, kind: str) -> None:
    assert ledger().count(kind) == 1
    assert story.callback(kind).state == StepState.SUCCEEDED


@then("the success callback ran exactly once, after D")
def success_last(story: Story) -> None:
    callback_once(story, "success")
    order = ledger()
    assert order.index("success") > order.index("D")


@then(parsers.parse("the {kind} callback never ran"))
def callback_never(story: Story, kind: str) -> None:
    assert kind not in ledger()
    assert story.callback(kind).state == StepState.CANCELLED
    assert not Job.objects.filter(flow_step=story.callback(kind)).exists()


@then("the flow is completed")
def completed(story: Story) -> None:
    flow = story.flow
    assert (flow.state, flow.blocked_by, flow.open_steps) == (FlowState.COMPLETED, None, 0)
    assert flow.finished_at is not None


@then("the flow is running")
def running(story: Story) -> None:
    assert story.flow.state == FlowState.RUNNING


@then("the confirmation names D and the success callback")
def confirmation(story: Story) -> None:
    dead = story.dead_letter("B")
    assert story.confirmation == {dead.pk: ["D", story.callback("success").name]}


@then("D is cancelled and never ran")
def d_cancelled(story: Story) -> None:
    assert "D" not in ledger()
    assert story.step("D").state == StepState.CANCELLED
    assert not Job.objects.filter(flow_step__name="D").exists()


@then("A has run and B is ready with 0 attempts")
def b_held(story: Story) -> None:
    assert ledger() == ["A"]
    job = Job.objects.get(flow_step=story.step("B"))
    assert (job.status, job.attempts) == (JobStatus.READY, 0)
    assert story.step("B").state == StepState.LIVE


@then("B ran once, at its first attempt")
def b_ran(story: Story) -> None:
    assert ledger() == ["A", "B"]
    job = Job.objects.get(flow_step=story.step("B"))
    assert (job.status, job.attempts) == (JobStatus.SUCCEEDED, 1)


@then(parsers.parse("the flow is cancelled by the operator, with {count:d} steps cancelled"))
def cancelled(story: Story, count: int) -> None:
    assert story.cancelled == Cancelled(story.flow_id, count, 0)
    flow = story.flow
    assert (flow.state, flow.cancelled_by) == (FlowState.CANCELLED, "ops")
    assert flow.finished_at is not None
    assert sorted(ledger()) == ["A", "C", "death"]


@then("B's dead letter is kept")
def dead_kept(story: Story) -> None:
    assert story.step("B").state == StepState.DEAD
    assert story.dead_letter("B").flow_step_id == story.step("B").pk


@then("cancelling the flow again changes nothing")
def cancel_again(story: Story) -> None:
    assert cancel_flow(story.flow_id, "someone else") is None
    assert story.flow.cancelled_by == "ops"
