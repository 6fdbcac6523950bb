"""Results between steps: a step's return value kept as JSON, and read by its children.

A step's return value is kept whenever it is JSON within the arguments' limits
(``MAX_ARGS_BYTES``, ``MAX_ARGS_DEPTH``), in the statement that ends the step,
as any kept result is (jobs/results.py). When a child reads its parents'
results (``add(..., results=True)``), a parent whose value cannot be kept
fails its attempt with :class:`UnstorableResult`, fatal: it would return the
same kind of value again. Otherwise such a value is dropped, unless its task
keeps its results (``keep_result``), which makes it fail the same way.
"""

from __future__ import annotations

from typing import Any

from django_jobretry.context import current_job
from django_jobretry.exceptions import InvalidFlow
from django_jobretry.models import FlowEdge, FlowStep, Job, JobStatus


def read_by_a_child(step_id: int) -> bool:
    """Whether a child reads the step's result (``results=True``), so a value that cannot be kept fails it.

    Asked only of a value that cannot be kept: a step that keeps its value reads nothing more.
    """
    return FlowStep.objects.filter(pk=step_id, keeps_result=True).exists()


def read_parent_results() -> dict[str, Any]:
    """The running step's parents' kept results by step name: those that succeeded, in step order."""
    context = current_job()
    step_id = None if context is None else context.flow_step_id
    if step_id is None:
        raise InvalidFlow("parent_results() reads a flow step's parents: call it inside a step a worker runs")
    parents = FlowEdge.objects.filter(child_id=step_id).values_list("parent_id", flat=True)
    rows = (
        Job.objects.filter(flow_step_id__in=parents, status=JobStatus.SUCCEEDED)
        .order_by("flow_step_id")
        .values_list("flow_step__name", "return_value")
    )
    return dict(rows)
