"""One flow in full, and a page of flows: what `manage.py flows list` and `show` read.

A step's job is found by ``Job.flow_step`` (the step is stable across
requeues, the job id is not), its dead letter by ``DeadLetter.flow_step``:
a dead step's ``dead_letter_id`` names it, and a step of a cancelled flow
stopped while running has one too (buried as "cancelled"). What a requeue of
a dead step resumes is read from the edges as the database would advance
them (jobs/functions.sql, ``jobretry_flow_release``): the steps still
waiting below it, through waiting steps. Those also below another dead
step wait for that one's requeue too, and are told apart.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field

from django.db.models import QuerySet

from django_jobretry.models import DeadLetter, Flow, FlowEdge, FlowStep, Job, StepState


@dataclass(frozen=True)
class StepLine:
    """A step, its current job (id and status) or dead letter, and for a dead one what its requeue resumes."""

    step: FlowStep
    job_id: int | None
    job_status: str | None
    dead_letter_id: int | None
    #: Dead steps: the waiting steps below it that wait for no other dead step, by name.
    resumes: list[str] = field(default_factory=list)
    #: Dead steps: the waiting steps below it that also wait below another dead step.
    also_behind_others: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FlowDetail:
    flow: Flow
    steps: list[StepLine]


def page(state: str | None, limit: int) -> list[Flow]:
    """The newest flows (of ``state``), at most ``limit``; an index walk either way."""
    flows: QuerySet[Flow] = Flow.objects.all()
    if state is None:
        return list(flows.order_by("-pk")[:limit])
    return list(flows.filter(state=state).order_by("-created_at", "-pk")[:limit])


def detail(flow_id: int) -> FlowDetail | None:
    """The flow, each of its steps in the order they were added, or None when no flow has this id."""
    flow = Flow.objects.filter(pk=flow_id).first()
    if flow is None:
        return None
    steps = list(FlowStep.objects.filter(flow=flow).order_by("pk"))
    jobs = {
        step_id: (job_id, status)
        for step_id, job_id, status in Job.objects.filter(flow_step__flow=flow).values_list(
            "flow_step_id", "pk", "status"
        )
    }
    dead = dict(DeadLetter.objects.filter(flow_step__flow=flow).values_list("flow_step_id", "pk"))
    behind = waiting_below(flow, [step.pk for step in steps if step.state == StepState.DEAD])
    names = {step.pk: step.name for step in steps}
    lines = []
    for step in steps:
        job_id, status = jobs.get(step.pk, (None, None))
        mine = behind.get(step.pk, set())
        others = set().union(*(ids for other, ids in behind.items() if other != step.pk))
        lines.append(
            StepLine(
                step,
                job_id,
                status,
                step.dead_letter_id or dead.get(step.pk),
                [names[pk] for pk in sorted(mine - others)],
                [names[pk] for pk in sorted(mine & others)],
            )
        )
    return FlowDetail(flow, lines)


def waiting_below(flow: Flow, dead_steps: list[int]) -> dict[int, set[int]]:
    """For each dead step: the waiting steps reached from it through waiting steps (one read of the edges)."""
    if not dead_steps:
        return {}
    children: defaultdict[int, list[int]] = defaultdict(list)
    edges = FlowEdge.objects.filter(child__flow=flow, child__state=StepState.WAITING, satisfied=False)
    for parent_id, child_id in edges.values_list("parent_id", "child_id"):
        children[parent_id].append(child_id)
    found: dict[int, set[int]] = {}
    for dead in dead_steps:
        seen: set[int] = set()
        frontier = deque([dead])
        while frontier:
            for child in children[frontier.popleft()]:
                if child not in seen:
                    seen.add(child)
                    frontier.append(child)
        found[dead] = seen
    return found
