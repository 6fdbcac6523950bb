"""Writing failed attempts back: a durable retry or a dead letter, fenced, in few round trips.

What a failure means depends on the row only through ``retry_for``: the time
since the first attempt, which is read under a row lock on the database's
clock (docs/design.md#rule-5). Every other decision is made before writing,
and the write itself carries the fence (docs/design.md#rule-3): the retries
of a batch are one UPDATE, a burial is one statement, and neither needs a
transaction of its own. Recording cannot fail (docs/design.md#rule-6): what
PostgreSQL refuses in an entry is written again as a minimal entry.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import DataError, connection, transaction

from django_jobretry.models import DeadReason
from django_jobretry.policy import Classification, Decision, GiveUp, Retry, RetryPolicy
from django_jobretry.services import transitions
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.decisions import decide
from django_jobretry.services.history import AttemptEntry
from django_jobretry.services.sql import CLEAR_LEASE, ELAPSED_SQL, FENCE, JOB, loggable, stamped, trimmed

logger = logging.getLogger("django_jobretry")


@dataclass(frozen=True)
class PendingFailure:
    """A failed attempt, classified and rendered, not yet written."""

    job: ClaimedJob
    policy: RetryPolicy
    classification: Classification
    entry: AttemptEntry
    #: Written instead of ``entry`` when PostgreSQL refuses something in it.
    fallback: AttemptEntry


@dataclass(frozen=True)
class WrittenFailure:
    """What was written for a failed attempt; ``decision`` is None when it was stale."""

    job: ClaimedJob
    policy: RetryPolicy
    entry: AttemptEntry
    decision: Decision | None
    dead_letter_id: int | None = None


@dataclass(frozen=True)
class Retrying:
    """A failed attempt to write back as ready again after ``delay``, with ``entry`` in its history."""

    job: ClaimedJob
    entry: AttemptEntry
    delay: timedelta


@dataclass(frozen=True)
class Failure:
    """Locked state of a running job whose attempt failed."""

    #: Since the first attempt; None when the row's first_attempt_at is not a finite time.
    elapsed: timedelta | None


def write_failures(pending: Sequence[PendingFailure], history_limit: int) -> Iterator[WrittenFailure]:
    """Write each failure, yielding it once it is written (so a caller can forget it then).

    Retries whose policy has no ``retry_for`` go in one statement at the end;
    each other failure is written on its own.
    """
    batch: list[tuple[PendingFailure, Retry]] = []
    for item in pending:
        if item.policy.retry_for is None:
            decision = _decide(item, elapsed=None)
            if isinstance(decision, Retry):
                batch.append((item, decision))
                continue
        yield _write_one(item, history_limit)
    if len(batch) == 1:
        yield _write_one(batch[0][0], history_limit)
    elif batch:
        yield from _write_retries(batch, history_limit)


def _write_retries(batch: list[tuple[PendingFailure, Retry]], history_limit: int) -> Iterator[WrittenFailure]:
    retrying = [Retrying(item.job, _with_delay(item.entry, retry), retry.delay) for item, retry in batch]
    try:
        with _statement_guard():
            kept = schedule_retries(retrying, history_limit)
    except DataError:
        # One entry PostgreSQL refuses fails them all: write each alone, so only that one falls back.
        for item, _ in batch:
            yield _write_one(item, history_limit)
        return
    for (item, retry), written in zip(batch, retrying, strict=True):
        decision = retry if item.job.id in kept else None
        yield WrittenFailure(item.job, item.policy, written.entry, decision)


def _write_one(item: PendingFailure, history_limit: int) -> WrittenFailure:
    try:
        return _write(item, item.entry, history_limit)
    except DataError as exc:
        logger.error(
            "could not store the error of job %s (%s); storing a minimal record",
            item.job.id,
            type(exc).__name__,
            extra={
                "job_id": item.job.id,
                "attempt": item.job.attempt,
                "outcome": "record_fallback",
                **loggable(exc),
            },
        )
        return _write(item, item.fallback, history_limit)


def _write(item: PendingFailure, entry: AttemptEntry, history_limit: int) -> WrittenFailure:
    if item.policy.retry_for is None:
        with _statement_guard():
            return _record(item, entry, _decide(item, elapsed=None), history_limit)
    with transaction.atomic():
        locked = lock_failed(item.job)
        if locked is None:
            return WrittenFailure(item.job, item.policy, entry, None)
        return _record(item, entry, _decide(item, elapsed=locked.elapsed), history_limit)


def _record(
    item: PendingFailure, entry: AttemptEntry, decision: Decision, history_limit: int
) -> WrittenFailure:
    if isinstance(decision, GiveUp):
        dead_id = transitions.bury(item.job, entry, DeadReason(decision.reason.value), history_limit)
        return WrittenFailure(item.job, item.policy, entry, decision if dead_id else None, dead_id)
    entry = _with_delay(entry, decision)
    kept = schedule_retries([Retrying(item.job, entry, decision.delay)], history_limit)
    return WrittenFailure(item.job, item.policy, entry, decision if kept else None)


def _decide(item: PendingFailure, *, elapsed: timedelta | None) -> Decision:
    return decide(
        item.policy,
        item.job.attempt,
        item.classification.kind,
        elapsed=elapsed,
        requested_delay=item.classification.requested_delay,
        max_attempts=item.job.max_attempts,
    )


def _with_delay(entry: AttemptEntry, retry: Retry) -> AttemptEntry:
    return {**entry, "delay": retry.delay.total_seconds()}


def _statement_guard() -> AbstractContextManager[Any]:
    """A savepoint only inside a caller's transaction (testing.run_jobs), where a refused
    statement must not abort it; in autocommit a statement that fails changes nothing."""
    return transaction.atomic() if connection.in_atomic_block else nullcontext()


# -- statements ---------------------------------------------------------------------------


def lock_failed(job: ClaimedJob) -> Failure | None:
    """Lock a running job to read its elapsed time; None if the lease was lost.

    Call inside ``transaction.atomic()``; the lock holds the row until the
    retry or dead-letter write in the same transaction.
    """
    sql = f"""
        SELECT {ELAPSED_SQL} FROM {JOB} AS j,
               (SELECT %(id)s::bigint AS id, %(attempt)s::int AS attempts, %(token)s::uuid AS token) AS d
        WHERE j.id = d.id AND {FENCE}
        FOR UPDATE OF j
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, {"id": job.id, "attempt": job.attempt, "token": job.token})
        row = cursor.fetchone()
    return None if row is None else Failure(elapsed=row[0])


def schedule_retries(retries: Sequence[Retrying], history_limit: int) -> set[int]:
    """Back to ready with a future run_at (durable backoff), all in one fenced statement.

    Returns the ids that still held their lease; the others changed nothing.
    """
    if not retries:
        return set()
    params: dict[str, Any] = {
        **transitions.fence_arrays([retry.job for retry in retries]),
        "entries": [json.dumps(retry.entry) for retry in retries],
        "delays": [retry.delay.total_seconds() for retry in retries],
        "limit": history_limit,
    }
    with connection.cursor() as cursor:
        cursor.execute(schedule_retries_sql(), params)
        return {row[0] for row in cursor.fetchall()}


def schedule_retries_sql() -> str:
    """The statement of :func:`schedule_retries`; public so its plan can be tested."""
    errors = f"(j.errors || jsonb_build_array({stamped('d.entry')}))"
    return f"""
        UPDATE {JOB} AS j
        SET status = 'ready', run_at = statement_timestamp() + make_interval(secs => d.delay),
            {CLEAR_LEASE},
            errors = {trimmed(errors, "%(limit)s")}
        FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(tokens)s::uuid[],
                    %(entries)s::jsonb[], %(delays)s::float8[]) AS d(id, attempts, token, entry, delay)
        WHERE j.id = d.id AND {FENCE}
        RETURNING j.id
    """
