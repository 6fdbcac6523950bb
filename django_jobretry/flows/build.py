"""A declared flow stored: every step checked first, then its rows and its steps' jobs in one transaction.

Each step is checked as an enqueue of its task is (its arguments, its limit's
key, its unique key: held by another job, the flow is refused), so a flow
with one bad step stores nothing. The rows go in four
statements whatever the flow's size: the flow, its steps, its edges
(callbacks get one from every ordinary step) and the jobs (statements.py
INSERT_STEPS), the ones without parents ready and woken at commit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction

from django_jobretry.console import counters
from django_jobretry.exceptions import InvalidFlow, InvalidJob
from django_jobretry.flows.steps import Step
from django_jobretry.jobs import statements, tracing
from django_jobretry.jobs.enqueue import (
    UNIQUE_CONSTRAINT,
    JobSpec,
    checked_arguments,
    holder_of,
    limit_lane,
    notify,
    shared_columns,
)
from django_jobretry.jobs.insert import Shared
from django_jobretry.models import (
    CounterEvent,
    Flow,
    FlowEdge,
    FlowStep,
    JobStatus,
    OnDead,
    StepRole,
    StepState,
)

logger = logging.getLogger("django_jobretry.flows")

#: The rule of the edges a callback gets from every ordinary step (the on-death one gets none).
CALLBACK_EDGES = {StepRole.ON_SUCCESS: OnDead.BLOCK, StepRole.ON_COMPLETE: OnDead.RUN}


@dataclass(frozen=True)
class Prepared:
    """One step, checked: what its job row holds."""

    step: Step
    shared: Shared
    args: str
    kwargs: str
    lane: str | None
    #: Its unique key (the task's ``unique_key``/``unique_args``) and how long it stays taken after.
    key: str | None
    held_for: timedelta | None


def store(name: str, steps: Sequence[Step]) -> Flow:
    """The flow's rows and jobs, in the caller's transaction (or one of their own); returns the Flow."""
    ordinary = [step for step in steps if step.role == StepRole.STEP]
    if not ordinary:
        raise InvalidFlow(f"flow {name!r} has no steps: add() at least one before enqueue()")
    prepared = [_prepare(name, step) for step in steps]
    _check_keys(name, prepared)
    parents = {step.name: _parents_of(step, ordinary) for step in steps}
    keeping = {parent.name for step in steps if step.reads_results for parent, _ in step.parents}
    counted = sum(step.role != StepRole.ON_DEATH for step in steps)
    try:
        row = _store(name, steps, prepared, parents, counted=counted, keeping=keeping)
    except IntegrityError as exc:
        if UNIQUE_CONSTRAINT not in str(exc):
            raise
        raise InvalidFlow(
            f"flow {name!r}: a step's unique key was taken by another enqueue while the flow was stored; "
            "nothing was stored"
        ) from None
    logger.info(
        "flow %s enqueued: %d steps",
        row.pk,
        len(steps),
        extra={"flow_id": row.pk, "flow": name, "steps": len(steps)},
    )
    return row


def _store(
    name: str,
    steps: Sequence[Step],
    prepared: Sequence[Prepared],
    parents: dict[str, list[tuple[Step, str]]],
    *,
    counted: int,
    keeping: set[str],
) -> Flow:
    """The rows, in one transaction: the flow, its steps, its edges, its jobs."""
    with transaction.atomic():
        row = Flow.objects.create(name=name, steps=len(steps), open_steps=counted)
        rows = FlowStep.objects.bulk_create(
            FlowStep(
                flow=row,
                name=step.name,
                role=step.role,
                task_name=each.shared.task_name,
                state=StepState.LIVE if _starts(step, parents) else StepState.WAITING,
                waiting_on=len(parents[step.name]),
                reads_results=step.reads_results,
                keeps_result=step.name in keeping,
            )
            for step, each in zip(steps, prepared, strict=True)
        )
        ids = {each.name: each.pk for each in rows}
        FlowEdge.objects.bulk_create(
            FlowEdge(parent_id=ids[parent.name], child_id=ids[child], on_dead=rule)
            for child, pairs in parents.items()
            for parent, rule in pairs
        )
        _insert_jobs(name, prepared, ids, parents)
    return row


def _starts(step: Step, parents: dict[str, list[tuple[Step, str]]]) -> bool:
    """Ready at once: no parent to wait for, and not the on-death callback (made ready by a death)."""
    return not parents[step.name] and step.role != StepRole.ON_DEATH


def _parents_of(step: Step, ordinary: Sequence[Step]) -> list[tuple[Step, str]]:
    if step.role in CALLBACK_EDGES:
        return [(parent, CALLBACK_EDGES[StepRole(step.role)]) for parent in ordinary]
    return list(step.parents)


def _insert_jobs(
    name: str, prepared: Sequence[Prepared], ids: dict[str, int], parents: dict[str, list[tuple[Step, str]]]
) -> None:
    """INSERT_STEPS for every step; the queues with a ready step woken at commit; the enqueues counted."""
    ready = [_starts(each.step, parents) for each in prepared]
    columns: dict[str, list[Any]] = {
        "task": [each.shared.task_name for each in prepared],
        "queue": [each.shared.queue_name for each in prepared],
        "policy": [each.shared.policy_name for each in prepared],
        "priority": [each.shared.priority for each in prepared],
        "max_attempts": [each.shared.max_attempts for each in prepared],
        "args": [each.args for each in prepared],
        "kwargs": [each.kwargs for each in prepared],
        "lane": [each.lane for each in prepared],
        "key": [each.key for each in prepared],
        "held_for": [each.held_for for each in prepared],
        "step": [ids[each.step.name] for each in prepared],
        "status": [JobStatus.READY if starts else JobStatus.WAITING for starts in ready],
    }
    first = prepared[0].shared.queue_name
    with tracing.producing(first, f"flow {name}", len(prepared)) as trace, connection.cursor() as cursor:
        cursor.execute(statements.INSERT_STEPS, {**columns, "trace": _json(trace)})
    notify(sorted({each.shared.queue_name for each, starts in zip(prepared, ready, strict=True) if starts}))
    counters.count(
        CounterEvent.ENQUEUED, [(each.shared.task_name, each.shared.queue_name) for each in prepared]
    )


def _prepare(flow: str, step: Step) -> Prepared:
    """The step checked as an enqueue of its task is; InvalidFlow names the step and what is wrong."""
    spec = _spec(flow, step)
    if spec.run_after is not None:
        raise InvalidFlow(
            f"step {step.name!r} of flow {flow!r}: {spec.name} has run_after; a step starts when its "
            "parents succeeded (use a step that snoozes, or a schedule, to wait)"
        )
    args, kwargs = step.call.args, dict(step.call.kwargs)
    try:
        arguments = checked_arguments(spec, args, kwargs)
        lane = limit_lane(spec, args, kwargs)
        key = spec.unique.key_for(spec.name, spec.func, args, kwargs, takes_context=spec.takes_context)
    except InvalidJob as exc:
        raise InvalidFlow(f"step {step.name!r} of flow {flow!r}: {exc}") from None
    window = spec.unique.window if key is not None else None
    return Prepared(step, shared_columns(spec), arguments.args_json, arguments.kwargs_json, lane, key, window)


def _check_keys(flow: str, prepared: Sequence[Prepared]) -> None:
    """A step's unique key must be free, as at an enqueue with ``on_conflict="raise"``, or nothing is stored.

    A flow cannot return another job in a step's place, nor give a ready
    holder its call: the steps after it would wait on a job of no flow.
    """
    seen: dict[str, str] = {}
    for each in prepared:
        if each.key is None:
            continue
        if each.key in seen:
            raise InvalidFlow(
                f"steps {seen[each.key]!r} and {each.step.name!r} of flow {flow!r} have the same unique key "
                f"{each.key!r}; a key is held by one job at a time"
            )
        seen[each.key] = each.step.name
        holder = holder_of(each.key, each.held_for)
        if holder is not None:
            raise InvalidFlow(
                f"step {each.step.name!r} of flow {flow!r}: its unique key {each.key!r} is held by job "
                f"{holder.pk} ({holder.status}); nothing was stored"
            )


def _spec(flow: str, step: Step) -> JobSpec:
    """The step's task as the enqueue service takes it: an ``@job``, or a django.tasks task of ours."""
    task = step.call.task
    spec = getattr(task, "spec", None)
    if isinstance(spec, JobSpec):
        return spec
    backend = task.get_backend() if callable(getattr(task, "get_backend", None)) else None
    if backend is not None and callable(getattr(backend, "job_spec", None)):
        try:
            found = backend.job_spec(task)
        except Exception as exc:  # the backend's own check names what is wrong with the task
            raise InvalidFlow(f"step {step.name!r} of flow {flow!r}: {exc}") from None
        if isinstance(found, JobSpec):
            return found
    raise InvalidFlow(
        f"step {step.name!r} of flow {flow!r}: {task!r} is neither an @job task nor a django.tasks task "
        "of django_jobretry's backend"
    )


def _json(value: dict[str, str] | None) -> str | None:
    return None if value is None else json.dumps(value)
