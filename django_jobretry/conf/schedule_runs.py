"""The job a schedule's run is, as its task is declared in this process: built once per look.

Layer 2 (registry, validation, settings), so that the workers' look
(services/schedules.py) and check E043 (schedule_checks.py) ask one
function whether a schedule can make a run, and get one answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.schedules import ScheduleSpec
from django_jobretry.exceptions import InvalidJob
from django_jobretry.policy.slots import Overlap
from django_jobretry.registry import registry, resolve_policy
from django_jobretry.signatures import check_call
from django_jobretry.validation import check_queue_name, encode_arguments


def overlap_key(name: str) -> str:
    """The unique key every run of ``name`` holds while live, under overlap "skip" and "queue"."""
    return f"schedule:{name}"


@dataclass(frozen=True)
class Run:
    """The columns of one schedule's runs, as its task is declared in this process now."""

    task: str
    queue: str
    policy: str
    priority: int
    max_attempts: int
    args: str
    kwargs: str
    #: The task's own deduplication key for these arguments, if it declares one; else the overlap key.
    key: str | None
    #: The task's ``unique_for``: a run is not inserted while a job with its key succeeded less ago.
    held_for: timedelta | None = None


def run_columns(spec: ScheduleSpec) -> Run:
    """The run of ``spec`` as a job; InvalidJob (or UnknownPolicy) when it cannot make one here.

    A task that deduplicates its enqueues (``unique_args``, ``unique_for``)
    deduplicates its runs too: they take its key for the schedule's arguments
    instead of the overlap key, so a live job of that key, or one that
    succeeded within the window, holds the slot back like a live run would.

    Its task is unknown in this process, refuses the arguments, names a queue
    enqueue would refuse, or its policy is not in the settings.
    """
    definition = registry.get(spec.task_name)
    if definition is None:
        raise InvalidJob(f"task {spec.task_name!r} is not registered in this process")
    arguments = encode_arguments(
        spec.task_name,
        spec.args,
        dict(spec.kwargs),
        max_bytes=jobretry_settings.max_args_bytes,
        max_depth=jobretry_settings.max_args_depth,
    )
    check_call(
        spec.task_name, definition.func, spec.args, dict(spec.kwargs), takes_context=definition.takes_context
    )
    policy_name, policy = resolve_policy(definition.policy)
    queue = spec.queue_name or definition.queue_name
    check_queue_name(queue)
    unique = definition.unique
    key = unique.key_for(
        spec.task_name, definition.func, spec.args, dict(spec.kwargs), takes_context=definition.takes_context
    )
    return Run(
        task=spec.task_name,
        queue=queue,
        policy=policy_name,
        priority=definition.priority,
        max_attempts=policy.max_attempts,
        args=arguments.args_json,
        kwargs=arguments.kwargs_json,
        key=key or (None if spec.overlap is Overlap.ALLOW else overlap_key(spec.name)),
        held_for=unique.window if key else None,
    )
