"""Results between steps: a step's return value kept as JSON, and read by its children.

A step's return value is kept when it is JSON within the arguments' limits
(``MAX_ARGS_BYTES``, ``MAX_ARGS_DEPTH``). When a child reads its parents'
results (``add(..., results=True)``), a parent whose value cannot be kept
fails its attempt with :class:`UnstorableResult`, fatal: it would return the
same kind of value again. Otherwise such a value is dropped, as ``@job``
values always were.
"""

from __future__ import annotations

from typing import Any

from django_jobretry.conf import jobretry_settings
from django_jobretry.context import current_job
from django_jobretry.exceptions import InvalidFlow, InvalidJob, UnstorableResult
from django_jobretry.models import FlowEdge, FlowStep, Job, JobStatus
from django_jobretry.validation import check_result


def step_result(task_name: str, step_id: int, value: Any) -> str | None:
    """``value`` as JSON text for SUCCEED, None when dropped, or UnstorableResult when a child needs it."""
    try:
        return check_result(
            task_name,
            value,
            max_bytes=jobretry_settings.max_args_bytes,
            max_depth=jobretry_settings.max_args_depth,
        )
    except (InvalidJob, TypeError, ValueError, RecursionError) as exc:
        if not FlowStep.objects.filter(pk=step_id, keeps_result=True).exists():
            return None
        reason = str(exc) if isinstance(exc, InvalidJob) else f"it is not JSON ({type(exc).__name__}: {exc})"
        raise UnstorableResult(
            f"a child step reads the result of {task_name!r} (results=True), which cannot be kept: {reason}. "
            "Return plain data (str, int, float, bool, None, list, dict) within MAX_ARGS_BYTES"
        ) from None


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
