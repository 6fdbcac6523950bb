"""What an operator does to a flow: cancel it, and see what a discard of one of its dead letters cancels."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

from django.db import connection, transaction

from django_jobretry.jobs import statements
from django_jobretry.models import Flow, FlowEdge, FlowStep, OnDead, StepState

logger = logging.getLogger("django_jobretry.flows")


@dataclass(frozen=True)
class Cancelled:
    """What a flow's cancel did: None when it had ended already (completed or cancelled)."""

    flow_id: int
    #: Waiting and ready steps cancelled now, their jobs deleted.
    cancelled: int
    #: Running steps asked to stop: their workers bury them as "cancelled" at the next heartbeat.
    stopping: int


def cancel_flow(flow_id: int, actor: str) -> Cancelled | None:
    """Cancel the flow: nothing of it starts again; its dead letters stay for an operator to discard."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statements.CANCEL_FLOW, {"flow": flow_id, "actor": actor})
        row = cursor.fetchone()
    if row is None:
        return None
    done = Cancelled(flow_id, row[0], row[1])
    logger.info(
        "flow %s cancelled by %s: %d steps cancelled, %d running asked to stop",
        flow_id,
        actor,
        done.cancelled,
        done.stopping,
        extra={"flow_id": flow_id, "actor": actor, "cancelled": done.cancelled, "stopping": done.stopping},
    )
    return done


def cancelled_by_discard(dead_letter_ids: list[int]) -> dict[int, list[str]]:
    """For each dead letter of a flow step: the waiting steps its discard would cancel, by name.

    As jobs/functions.sql jobretry_flow_release() walks them: a discarded
    step cancels its waiting children but those that run anyway ("run"),
    and each cancelled child its own. Read for the confirmation page; the
    discard itself decides again, in its transaction.
    """
    dead_steps = FlowStep.objects.filter(dead_letter_id__in=dead_letter_ids, state=StepState.DEAD)
    steps = {dead: step for dead, step in dead_steps.values_list("dead_letter_id", "pk") if dead is not None}
    found: dict[int, list[str]] = {}
    for dead_letter_id, step_id in steps.items():
        names: list[str] = []
        seen = {step_id}
        frontier = deque([step_id])
        while frontier:
            edges = FlowEdge.objects.filter(parent_id=frontier.popleft(), child__state=StepState.WAITING)
            # Children in the order they were added: a confirmation page lists the same names each time.
            kept = edges.exclude(on_dead=OnDead.RUN).order_by("child_id")
            for child_id, name in kept.values_list("child_id", "child__name"):
                if child_id not in seen:
                    seen.add(child_id)
                    names.append(name)
                    frontier.append(child_id)
        found[dead_letter_id] = names
    return found


def flow_of(dead_letter_id: int) -> Flow | None:
    """The flow a dead letter blocks, if it is one of a flow's steps."""
    step = FlowStep.objects.filter(dead_letter_id=dead_letter_id).select_related("flow").first()
    return None if step is None else step.flow
