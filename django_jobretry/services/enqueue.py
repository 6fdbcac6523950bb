"""Enqueue: validate, insert, wake the workers - all in the caller's transaction."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, connection, transaction
from django.db.models import DurationField, Value
from django.db.models.functions import Now
from django.db.models.sql import InsertQuery

from django_jobretry.conf import jobretry_settings
from django_jobretry.exceptions import InvalidJob
from django_jobretry.models import CounterEvent, Job
from django_jobretry.services import counters
from django_jobretry.services.counters import ENQUEUE_COUNT_CTE
from django_jobretry.validation import check_arguments

if TYPE_CHECKING:
    from django_jobretry.decorators import JobDefinition

logger = logging.getLogger("django_jobretry")

#: LISTEN/NOTIFY channel; the payload is the queue name.
CHANNEL = "django_jobretry"
UNIQUE_CONSTRAINT = "jobretry_job_unique_live_key"


def enqueue(definition: JobDefinition[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Job:
    """Insert one job (or return the live one holding its unique_key)."""
    job = _build(definition, args, kwargs)
    if definition.unique_key is not None:
        return _enqueue_unique(job)
    insert_and_notify(job)
    _log_enqueued(job)
    return job


def insert_and_notify(job: Job) -> None:
    """INSERT the job, count it and wake the workers of its queue in one statement: one round trip.

    In autocommit the statement is its own transaction; inside the caller's
    ``transaction.atomic()`` PostgreSQL still delivers the NOTIFY only at
    commit, and not at all on rollback. The INSERT is Django's own (its
    field preparation and database defaults); only ``post_save`` and
    ``pre_save`` are not sent, as for ``bulk_create``. The enqueue counter
    is written in the same statement, into this session's own row, so
    concurrent transactions enqueueing the same task never wait for each
    other (services/counters.py).
    """
    meta = Job._meta
    fields = [field for field in meta.local_concrete_fields if not field.generated and field is not meta.pk]
    query = InsertQuery(Job)
    query.insert_values(fields, [job])
    compiler = query.get_compiler(connection=connection)
    returning = meta.db_returning_fields
    compiler.returning_fields = returning
    [(insert, params)] = compiler.as_sql()
    # The CTE's columns are RETURNING's, in order; PostgreSQL needs no conversion of them.
    sql = f"WITH j AS ({insert}), {ENQUEUE_COUNT_CTE} SELECT j.*, pg_notify(%s, %s)::text FROM j"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, job.task_name, job.queue_name, CHANNEL, job.queue_name])
        row = cursor.fetchone() or ()
    for field, value in zip(returning, row, strict=False):
        setattr(job, field.attname, value)
    job._state.adding = False
    job._state.db = connection.alias


def bulk_enqueue(
    definition: JobDefinition[Any], calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]]
) -> list[Job]:
    """Validate every call first, then insert all jobs in one statement."""
    if definition.unique_key is not None:
        raise InvalidJob("bulk_enqueue does not take unique_key; enqueue keyed jobs one by one")
    jobs = [_build(definition, tuple(args), dict(kwargs)) for args, kwargs in calls]
    if not jobs:
        return []
    with transaction.atomic():
        created = Job.objects.bulk_create(jobs)
        counters.count(CounterEvent.ENQUEUED, [(job.task_name, job.queue_name) for job in created])
        notify(sorted({job.queue_name for job in created}))
    for job in created:
        _refresh_computed(job)
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


def _build(definition: JobDefinition[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Job:
    policy_name, policy = definition.resolve_policy()
    safe_args, safe_kwargs = check_arguments(
        definition.name,
        args,
        kwargs,
        max_bytes=jobretry_settings.max_args_bytes,
        max_depth=jobretry_settings.max_args_depth,
    )
    job = Job(
        task_name=definition.name,
        queue_name=definition.queue_name,
        policy_name=policy_name,
        priority=definition.priority,
        args=safe_args,
        kwargs=safe_kwargs,
        max_attempts=policy.max_attempts,
        unique_key=definition.unique_key,
    )
    if isinstance(definition.run_after, timedelta):
        # Relative delays use the database clock, like everything else.
        job.run_at = Now() + Value(definition.run_after, output_field=DurationField())
    elif definition.run_after is not None:
        job.run_at = definition.run_after
    return job


def _refresh_computed(job: Job) -> None:
    # An expression assigned before save stays an expression on the instance.
    if not hasattr(job.run_at, "isoformat"):
        job.refresh_from_db(fields=["run_at"])


def _enqueue_unique(job: Job) -> Job:
    """Insert, or return the live job that already holds the key.

    The conditional unique index decides under concurrency: a second insert
    waits for the first to commit, then fails and finds the winner's row.
    """
    for _ in range(5):
        try:
            if connection.in_atomic_block:  # a failed INSERT must not abort the caller's transaction
                with transaction.atomic():
                    insert_and_notify(job)
            else:
                insert_and_notify(job)
        except IntegrityError as exc:
            if UNIQUE_CONSTRAINT not in str(exc):
                raise
            job.pk = None
            live = Job.objects.live().filter(unique_key=job.unique_key).first()
            if live is not None:
                logger.info(
                    "job %s already live for unique_key",
                    live.pk,
                    extra={"job_id": live.pk, "task": live.task_name, "outcome": "deduplicated"},
                )
                return live
            # The holder finished between our insert and our read: try again.
            continue
        _log_enqueued(job)
        return job
    raise InvalidJob(f"unique_key {job.unique_key!r}: the live job kept changing; enqueue again")


def _log_enqueued(job: Job) -> None:
    # DEBUG: enqueues are the hot path of the web process, transitions are INFO.
    logger.debug(
        "job %s enqueued",
        job.pk,
        extra={"job_id": job.pk, "task": job.task_name, "queue": job.queue_name, "outcome": "enqueued"},
    )
