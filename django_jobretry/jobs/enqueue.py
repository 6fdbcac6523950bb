"""Enqueue: validate, insert, wake the workers - all in the caller's transaction."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

from django_jobretry import signals
from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.uniqueness import Uniqueness
from django_jobretry.exceptions import InvalidJob
from django_jobretry.jobs import tracing
from django_jobretry.jobs.insert import CHANNEL, Shared, insert_many, insert_one
from django_jobretry.jobs.unique import UNIQUE_CONSTRAINT, Outcome, enqueue_unique
from django_jobretry.limits.declare import lane
from django_jobretry.models import Job
from django_jobretry.models.instants import check_run_after
from django_jobretry.policy import RetryPolicy
from django_jobretry.policy.limits import InvalidLimit
from django_jobretry.registry import TaskDefinition, resolve_policy
from django_jobretry.signatures import check_call
from django_jobretry.validation import Arguments, encode_arguments

logger = logging.getLogger("django_jobretry")

__all__ = [
    "CHANNEL",
    "UNIQUE_CONSTRAINT",
    "Enqueued",
    "JobSpec",
    "bulk_enqueue",
    "enqueue",
    "enqueue_call",
    "notify",
]


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What an enqueue stores of its task: built by ``@job`` and by the django.tasks backend.

    A plain value, so the service depends on no front door's type: each
    front door validates its own declaration once and hands this over.
    """

    #: The task name workers look up in the registry.
    name: str
    #: The function, to check that it can take the call's arguments.
    func: Callable[..., Any]
    queue_name: str
    #: A JOBRETRY policy name, or an inline RetryPolicy registered with the task.
    policy: str | RetryPolicy
    priority: int
    run_after: datetime | timedelta | None
    #: How its enqueues are deduplicated (a key or key arguments, a window, a conflict mode).
    unique: Uniqueness
    #: Whether the function's first parameter is django.tasks' context, which the worker passes.
    takes_context: bool


@dataclass(frozen=True, slots=True)
class Enqueued:
    """What one enqueue did: its job, and whether it inserted it or found it holding its unique key."""

    job: Job
    #: "inserted", or "deduplicated" / "replaced": the job already held the key (on_conflict).
    outcome: Outcome

    @property
    def inserted(self) -> bool:
        """Whether the job is new: a front door announces only new ones."""
        return self.outcome == "inserted"


def enqueue(definition: JobSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Job:
    """Insert one job: one statement in autocommit; a deduplicated one goes through unique.py.

    The job's ``deduplicated`` says whether it already held the call's unique key.
    """
    return enqueue_call(definition, args, kwargs).job


def enqueue_call(definition: JobSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Enqueued:
    """:func:`enqueue`, saying what it did: a front door announces only new jobs.

    A job that already held the key is marked ``deduplicated`` and announced
    with :data:`~django_jobretry.signals.job_deduplicated`, so the caller can
    tell that its call was not enqueued (the job may even have succeeded).
    """
    check_run_after(run_at := definition.run_after)
    shared = _shared(definition)
    arguments = checked_arguments(definition, args, kwargs)
    lane = limit_lane(definition, args, kwargs)
    unique = definition.unique
    key = unique.key_for(
        definition.name, definition.func, args, kwargs, takes_context=definition.takes_context
    )
    with tracing.producing(definition.queue_name, definition.name) as trace:
        outcome: Outcome = "inserted"
        if key is not None:
            job, outcome = enqueue_unique(
                shared, arguments, key, unique, run_at=run_at, lane=lane, trace=trace
            )
        else:
            job = insert_one(shared, arguments, None, run_at, lane, trace=trace)
            _log_enqueued(job)
        tracing.sent(job.pk)
    job.deduplicated = outcome != "inserted"
    if job.deduplicated:
        _announce_deduplicated(job, replaced=outcome == "replaced")
    return Enqueued(job, outcome)


def bulk_enqueue(definition: JobSpec, calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]]) -> list[Job]:
    """Validate every call first, then insert all jobs, count them and wake the workers in one statement."""
    if definition.unique.deduplicates:
        raise InvalidJob(
            f"{definition.name}: bulk_enqueue does not take unique_key or unique_args; "
            "enqueue keyed jobs one by one"
        )
    check_run_after(run_at := definition.run_after)
    pairs = [(tuple(args), dict(kwargs)) for args, kwargs in calls]
    rows = [checked_arguments(definition, args, kwargs) for args, kwargs in pairs]
    if not rows:
        return []
    lanes = [limit_lane(definition, args, kwargs) for args, kwargs in pairs]
    with tracing.producing(definition.queue_name, definition.name, len(rows)) as trace:
        created = insert_many(_shared(definition), rows, run_at, lanes, trace=trace)
    logger.debug(
        "enqueued %d jobs of %s",
        len(created),
        definition.name,
        extra={"task": definition.name, "queue": definition.queue_name, "count": len(created)},
    )
    return created


def notify(queue_names: Sequence[str]) -> None:
    """Wake listening workers; PostgreSQL delivers it only if the transaction commits."""
    with connection.cursor() as cursor:
        for queue_name in queue_names:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, queue_name])


def checked_arguments(
    definition: JobSpec | TaskDefinition, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Arguments:
    """The call's arguments as stored, or InvalidJob: not JSON, or not a call the function can take.

    Every enqueue checks its arguments here, and so does a repair of a dead
    letter's (deadletters/repair.py), with the task's registered definition.
    """
    arguments = encode_arguments(
        definition.name,
        args,
        kwargs,
        max_bytes=jobretry_settings.max_args_bytes,
        max_depth=jobretry_settings.max_args_depth,
    )
    check_call(definition.name, definition.func, args, kwargs, takes_context=definition.takes_context)
    return arguments


def limit_lane(
    definition: JobSpec | TaskDefinition, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str | None:
    """The job's limit lane (limits/declare.py), or InvalidJob when its concurrency key cannot be filled."""
    try:
        return lane(
            definition.name,
            definition.queue_name,
            definition.func,
            args,
            kwargs,
            takes_context=definition.takes_context,
        )
    except InvalidLimit as exc:
        raise InvalidJob(f"{definition.name}: {exc}") from None


def _shared(definition: JobSpec) -> Shared:
    """The columns all of the definition's jobs share; the policy is read from the settings now."""
    policy_name, policy = resolve_policy(definition.policy)
    return Shared(
        task_name=definition.name,
        queue_name=definition.queue_name,
        policy_name=policy_name,
        priority=definition.priority,
        max_attempts=policy.max_attempts,
    )


def _announce_deduplicated(job: Job, *, replaced: bool) -> None:
    """Tell receivers that an enqueue found ``job`` holding its key: its id and key, never the arguments."""
    extra = {"job_id": job.pk, "task": job.task_name, "queue": job.queue_name}
    signals.send(
        signals.job_deduplicated,
        Job,
        extra,
        job_id=job.pk,
        task_name=job.task_name,
        queue_name=job.queue_name,
        unique_key=job.unique_key,
        status=job.status,
        replaced=replaced,
    )


def _log_enqueued(job: Job) -> None:
    # DEBUG: enqueues are the hot path of the web process, transitions are INFO.
    logger.debug(
        "job %s enqueued",
        job.pk,
        extra={"job_id": job.pk, "task": job.task_name, "queue": job.queue_name, "outcome": "enqueued"},
    )
