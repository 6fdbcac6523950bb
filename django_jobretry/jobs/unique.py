"""Deduplicated enqueue: one job per unique key while it is live, and with ``unique_for`` after it succeeded.

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
from datetime import datetime, timedelta
from typing import Literal

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Value
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Now

from django_jobretry.conf.uniqueness import Uniqueness
from django_jobretry.exceptions import InvalidJob, JobConflict
from django_jobretry.jobs import statements
from django_jobretry.jobs.insert import RunAt, Shared, insert_one
from django_jobretry.jobs.sql import statement_guard, violates
from django_jobretry.models import Job
from django_jobretry.validation import Arguments

logger = logging.getLogger("django_jobretry")

#: The index that keeps one live job per key, whoever inserts it.
UNIQUE_CONSTRAINT = "jobretry_job_unique_live_key"
#: Serializes the windowed enqueues of one key until the transaction that took it ends.
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('django_jobretry unique ' || %s, 0))"
#: What an enqueue of a key did: inserted a job, returned the holder, or gave a ready holder its call.
Outcome = Literal["inserted", "deduplicated", "replaced"]
#: Times a lock-free writer (a requeue, a schedule) may take the key between our look and our insert.
ROUNDS = 5


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
    logger.debug(
        "job %s enqueued",
        job.pk,
        extra={"job_id": job.pk, "task": job.task_name, "queue": job.queue_name, "outcome": "enqueued"},
    )
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
