"""Enqueue: validate, insert, wake the workers - all in the caller's transaction.

The statements are insert.py's. Deduplicated (:func:`enqueue_unique`): one job per unique key
while it is live, and with ``unique_for`` after it succeeded.

Without a window the live-key unique index decides, in the enqueue's one
statement: a second insert of a live key waits for the first to commit,
then fails, and the job holding the key is looked up.

With ``unique_for`` a key is also held by a job that succeeded less than
that long ago, which no index can express (a time passes); so the enqueue
takes a transaction-level advisory lock on its key, and only then looks for
the holder and inserts. Two enqueuers of one key are serialized until the
first commits (inside a caller's ``transaction.atomic()``, until that
commits), and the second's look starts after that commit: it sees the first
job live or succeeded, both of which hold the key. That costs a few round
trips more than the plain insert, so only windowed enqueues pay it.

Either way the unique index backs the invariant against writers that take
no lock (a requeue, a schedule's run): when it refuses the INSERT, the
enqueue looks again. What a taken key does is the enqueue's ``on_conflict``
(conf/uniqueness.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Value
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Now

from django_jobretry import signals
from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.uniqueness import Uniqueness
from django_jobretry.exceptions import InvalidJob, JobConflict
from django_jobretry.jobs import statements, tracing
from django_jobretry.jobs.insert import CHANNEL, RunAt, Shared, insert_many, insert_one
from django_jobretry.jobs.sql import statement_guard, violates
from django_jobretry.limits import lane
from django_jobretry.models import Job
from django_jobretry.models.instants import check_run_after
from django_jobretry.policy import RetryPolicy
from django_jobretry.policy.limits import InvalidLimit
from django_jobretry.registry import TaskDefinition, resolve_policy
from django_jobretry.signatures import check_call
from django_jobretry.validation import Arguments, encode_arguments

logger = logging.getLogger("django_jobretry")

#: The index that keeps one live job per key, whoever inserts it.
UNIQUE_CONSTRAINT = "jobretry_job_unique_live_key"
#: Serializes the windowed enqueues of one key until the transaction that took it ends.
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('django_jobretry unique ' || %s, 0))"
#: What an enqueue of a key did: inserted a job, returned the holder, or gave a ready holder its call.
Outcome = Literal["inserted", "deduplicated", "replaced"]
#: Times a lock-free writer (a requeue, a schedule) may take the key between our look and our insert.
ROUNDS = 5


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
    """Insert one job: one statement in autocommit; a deduplicated one goes through :func:`enqueue_unique`.

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
    shared = shared_columns(definition)
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
        created = insert_many(shared_columns(definition), rows, run_at, lanes, trace=trace)
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
    """The job's limit lane (limits/__init__.py), or InvalidJob when its concurrency key cannot be filled."""
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


# -- deduplicated enqueue: one job per unique key ------------------------------------------------
def enqueue_unique(
    shared: Shared,
    arguments: Arguments,
    key: str,
    unique: Uniqueness,
    *,
    run_at: RunAt,
    lane: str | None,
    trace: dict[str, str] | None = None,
) -> tuple[Job, Outcome]:
    """Insert a job holding ``key``, or do what ``unique.on_conflict`` says with the job that holds it.

    Returns the job and what this call did with it: inserted it, or found it
    holding the key (and, with ``"replace"``, gave it the new call).
    """
    for _ in range(ROUNDS):
        try:
            if unique.window is None:
                with statement_guard():  # a refused INSERT must not abort the caller's transaction
                    return _inserted(
                        shared, arguments, key, None, run_at=run_at, lane=lane, trace=trace
                    ), "inserted"
            # In the caller's transaction a savepoint: a refusal undoes nothing of theirs.
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(_LOCK, [key])
                holder = holder_of(key, unique.window)
                if holder is None:
                    job = _inserted(
                        shared, arguments, key, unique.window, run_at=run_at, lane=lane, trace=trace
                    )
                    return job, "inserted"
                return _conflict(holder, unique, arguments, run_at, lane)
        except IntegrityError as exc:
            if not violates(exc, UNIQUE_CONSTRAINT):
                raise
        holder = holder_of(key, unique.window)
        if holder is not None:
            return _conflict(holder, unique, arguments, run_at, lane)
        # The holder finished between our insert and our look: try again.
    raise InvalidJob(f"unique_key {key!r}: the job holding it kept changing; enqueue again")


def holder_of(key: str, window: timedelta | None) -> Job | None:
    """The job holding ``key`` now: the live one, else the latest that succeeded within ``window``."""
    holders = Job.objects.holding_key(key, window)
    return holders.order_by(F("finished_at").desc(nulls_first=True), "-pk").first()


def _inserted(
    shared: Shared,
    arguments: Arguments,
    key: str,
    window: timedelta | None,
    *,
    run_at: RunAt,
    lane: str | None,
    trace: dict[str, str] | None,
) -> Job:
    job = insert_one(shared, arguments, key, run_at, lane, unique_for=window, trace=trace)
    _log_enqueued(job)
    return job


def _conflict(
    holder: Job, unique: Uniqueness, arguments: Arguments, run_at: RunAt, lane: str | None
) -> tuple[Job, Outcome]:
    """The enqueue found ``holder`` holding its key: raise, return it, or replace a ready one's call."""
    extra = {"job_id": holder.pk, "attempt": holder.attempts, "task": holder.task_name}
    if unique.on_conflict == "raise":
        logger.info("unique key held by job %s", holder.pk, extra={**extra, "outcome": "conflict"})
        raise JobConflict(holder.unique_key or "", holder.pk, holder.status)
    if unique.on_conflict == "replace" and _replaced(holder, arguments, run_at, lane):
        logger.info("job %s replaced by a new enqueue", holder.pk, extra={**extra, "outcome": "replaced"})
        holder.refresh_from_db()
        return holder, "replaced"
    logger.info("job %s already holds the unique key", holder.pk, extra={**extra, "outcome": "deduplicated"})
    return holder, "deduplicated"


def _replaced(holder: Job, arguments: Arguments, run_at: RunAt, lane: str | None) -> bool:
    """Give a still-ready ``holder`` the new call: one UPDATE under its row lock, fenced on "ready".

    A worker that claimed it first wins (the UPDATE then matches no row): a
    running or finished job is never rewritten.
    """
    when: datetime | Now | CombinedExpression
    if run_at is None:
        when = Now()
    elif isinstance(run_at, timedelta):
        when = Now() + Value(run_at)
    else:
        when = run_at
    run_after = None if run_at is None else when
    changed = statements.replace_call(
        holder.pk, arguments.args, arguments.kwargs, run_at=when, run_after=run_after, lane=lane
    )
    return changed == 1


def shared_columns(definition: JobSpec) -> Shared:
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
