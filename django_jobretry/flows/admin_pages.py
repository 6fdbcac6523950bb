"""A flow's page (its steps and their graph) and the "are you sure?" page before cancelling flows.

The graph is drawn on the server as inline SVG, with no JavaScript: each
step sits in a column by its level (a step without parents is level 1, any
other one more than its highest parent), steps of a level in the order they
were added, each edge a curve from parent to child. A step's colour says
its state (admin.css, ``jobretry-step-*``); a dead step links to its dead
letter, a step with a job to that job, for users who may view them. The
same steps are listed in a table below it, the accessible form of the
picture. A flow of more than :data:`GRAPH_LIMIT` steps (a batch of
thousands) is listed only, its first :data:`STEPS_SHOWN` steps: a picture
that large says nothing. Arguments are never read here.

Cancelling a flow deletes the jobs of its waiting and ready steps at once,
and running ones stop at their worker's next heartbeat; it cannot be
undone. So, like a discard, it asks first and says how many steps of each
flow are waiting, ready and running now (read from the jobs, as the cancel
reads them: jobs/functions.sql ``jobretry_flow_cancel``).
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any

from django.db.models import Count
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse

from django_jobretry.admin import rendering
from django_jobretry.display import count_of
from django_jobretry.models import Flow, FlowEdge, FlowState, FlowStep, Job, JobStatus, StepRole

TEMPLATE = "admin/django_jobretry/flow/confirmation.html"
#: Most steps drawn as a graph; a larger flow is only listed.
GRAPH_LIMIT = 150
#: Most steps listed on a flow's page.
STEPS_SHOWN = 500
#: The picture's sizes, in pixels: a step's box, the room between columns and rows, the margin.
NODE_W, NODE_H, COL_GAP, ROW_GAP, PAD = 160, 40, 60, 14, 10
#: Characters of a step's name shown in its box (the whole name is its tooltip and in the table).
NAME_CHARS = 22
#: A flow's states a cancel acts on; the others have ended.
OPEN_STATES = (FlowState.RUNNING, FlowState.BLOCKED)
#: What a cancel does, said on its confirmation page.
FOLLOWS = (
    "Their waiting and ready steps are cancelled and those jobs deleted; running steps are asked to "
    "stop and end at their worker's next heartbeat. Their dead letters stay, to requeue or discard. "
    "The admin log records who cancelled them."
)


@dataclass
class Node:
    """One step as the page shows it: its row, level, place in the picture and where it leads."""

    pk: int
    name: str
    role: str
    role_label: str
    task: str
    state: str
    state_label: str
    ended: str
    level: int = 1
    x: int = 0
    y: int = 0
    url: str = ""
    link_text: str = ""
    parents: str = ""

    @property
    def short(self) -> str:
        return self.name if len(self.name) <= NAME_CHARS else self.name[: NAME_CHARS - 1] + "…"


def levels(nodes: list[int], edges: list[tuple[int, int]], callbacks: set[int]) -> dict[int, int]:
    """Each step's level: 1 without parents, else 1 + its highest parent's.

    A callback without parents (on_death) goes in the last column, beside
    the other callbacks, not among the first steps. The graph has no cycle
    (build.py refuses one); a step left unreached by a corrupt row goes last.
    """
    children: dict[int, list[int]] = defaultdict(list)
    waiting = dict.fromkeys(nodes, 0)
    for parent, child in edges:
        if parent in waiting and child in waiting:
            children[parent].append(child)
            waiting[child] += 1
    found = dict.fromkeys(nodes, 1)
    ready = deque(pk for pk in nodes if waiting[pk] == 0)
    done: set[int] = set()
    while ready:
        pk = ready.popleft()
        done.add(pk)
        for child in children[pk]:
            found[child] = max(found[child], found[pk] + 1)
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    # A callback without parents (on_death) is not counted for the last column, then put in it.
    has_parents = {child for _, child in edges}
    alone = {pk for pk in callbacks if pk not in has_parents}
    last = max((found[pk] for pk in done - alone), default=1)
    for pk in nodes:
        if pk in alone:
            found[pk] = last
        elif pk not in done:
            found[pk] = last + 1
    return found


def steps_of(flow: Flow, *, site: str, may_view_job: bool, may_view_dead: bool) -> dict[str, Any]:
    """The page's context: the steps in level order, and the picture when the flow is small enough."""
    rows = list(
        FlowStep.objects.filter(flow=flow)
        .order_by("pk")
        .only("pk", "name", "role", "task_name", "state", "dead_letter_id", "ended_at")[: STEPS_SHOWN + 1]
    )
    drawn = len(rows) <= GRAPH_LIMIT
    nodes = {
        row.pk: Node(
            row.pk,
            row.name,
            row.role,
            row.get_role_display(),
            row.task_name,
            row.state,
            row.get_state_display(),
            rendering.time_text(row.ended_at),
        )
        for row in rows[:STEPS_SHOWN]
    }
    jobs = Job.objects.filter(flow_step_id__in=list(nodes)).values_list("flow_step_id", "pk")
    for step_id, job_id in jobs:
        if may_view_job and step_id is not None:
            nodes[step_id].url = reverse(f"{site}:django_jobretry_job_change", args=[job_id])
            nodes[step_id].link_text = f"job {job_id}"
    for row in rows[:STEPS_SHOWN]:
        if row.dead_letter_id is not None:
            node = nodes[row.pk]
            node.link_text = f"dead letter {row.dead_letter_id}"
            if may_view_dead:
                node.url = reverse(f"{site}:django_jobretry_deadletter_change", args=[row.dead_letter_id])
    if not drawn:
        return {"steps": list(nodes.values()), "more_steps": flow.steps - len(nodes), "graph": None}
    edges = list(FlowEdge.objects.filter(child__flow=flow).values_list("parent_id", "child_id", "on_dead"))
    callbacks = {pk for pk, node in nodes.items() if node.role != StepRole.STEP}
    placed = levels(list(nodes), [(parent, child) for parent, child, _ in edges], callbacks)
    names = {pk: node.name for pk, node in nodes.items()}
    parents: dict[int, list[str]] = defaultdict(list)
    for parent, child, _ in edges:
        parents[child].append(names[parent])
    for pk, node in nodes.items():
        node.level = placed[pk]
        node.parents = ", ".join(parents[pk])
    ordered = sorted(nodes.values(), key=lambda node: (node.level, node.pk))
    return {"steps": ordered, "more_steps": 0, "graph": _picture(ordered, edges)}


def _picture(ordered: list[Node], edges: list[tuple[int, int, str]]) -> dict[str, Any]:
    """Where each box and edge goes: columns by level, rows in order within a column."""
    rows_in: dict[int, int] = defaultdict(int)
    for node in ordered:
        node.x = PAD + (node.level - 1) * (NODE_W + COL_GAP)
        node.y = PAD + rows_in[node.level] * (NODE_H + ROW_GAP)
        rows_in[node.level] += 1
    at = {node.pk: node for node in ordered}
    lines = []
    for parent_id, child_id, on_dead in edges:
        parent, child = at[parent_id], at[child_id]
        x1, y1 = parent.x + NODE_W, parent.y + NODE_H // 2
        x2, y2 = child.x, child.y + NODE_H // 2
        bend = COL_GAP // 2
        callback = child.role != StepRole.STEP
        lines.append(
            {
                "d": f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2 - 4},{y2}",
                "css": f"jobretry-edge-{on_dead}{' jobretry-edge-callback' if callback else ''}",
            }
        )
    columns = max((node.level for node in ordered), default=1)
    tallest = max(rows_in.values(), default=1)
    return {
        "nodes": ordered,
        "edges": lines,
        "width": 2 * PAD + columns * NODE_W + (columns - 1) * COL_GAP,
        "height": 2 * PAD + tallest * NODE_H + (tallest - 1) * ROW_GAP,
        "node_w": NODE_W,
        "node_h": NODE_H,
        "text_x": 8,
        "name_y": 17,
        "state_y": 32,
    }


def live_counts(flow_ids: list[int]) -> dict[int, dict[str, int]]:
    """Per flow: its waiting, ready and running jobs now, what a cancel ends or stops."""
    found: dict[int, dict[str, int]] = {pk: {"waiting": 0, "ready": 0, "running": 0} for pk in flow_ids}
    rows = (
        Job.objects.filter(
            flow_step__flow_id__in=flow_ids,
            status__in=[JobStatus.WAITING, JobStatus.READY, JobStatus.RUNNING],
        )
        .values_list("flow_step__flow_id", "status")
        .annotate(n=Count("pk"))
    )
    for flow_id, status, n in rows:
        found[flow_id][status] = n
    return found


def cancel_page(
    model_admin: Any,
    request: HttpRequest,
    flows: list[Flow],
    *,
    hidden: list[tuple[str, str]],
    form_url: str,
    cancel_url: str,
) -> TemplateResponse:
    """Cancel these flows? Each with its state and its waiting, ready and running steps."""
    counts = live_counts([flow.pk for flow in flows])
    items: list[dict[str, Any]] = [
        {"flow": flow, "ended": flow.state not in OPEN_STATES, **counts[flow.pk]} for flow in flows
    ]
    live = [item for item in items if not item["ended"]]
    stopped = sum(int(item["waiting"]) + int(item["ready"]) for item in live)
    running = sum(int(item["running"]) for item in live)
    question = (
        f"Cancel {count_of(len(live), 'flow')}, cancelling {count_of(stopped, 'waiting or ready step')} "
        f"and stopping {count_of(running, 'running step')}?"
    )
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Are you sure?",
        "subtitle": None,
        "opts": model_admin.opts,
        "verb": "cancel",
        "question": question,
        "follows": FOLLOWS,
        "button": "Yes, cancel",
        "items": items,
        "live": len(live),
        "hidden_fields": hidden,
        "form_url": form_url,
        "cancel_url": cancel_url,
        "media": model_admin.media,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, TEMPLATE, context)
