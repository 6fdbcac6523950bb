"""Writing failed attempts back: a durable retry or a dead letter, fenced, in few round trips.

What a failure means depends on the row only through ``retry_for``: the time
since the first attempt, which is read under a row lock on the database's
clock (docs/design.md#rule-5). Every other decision is made before writing,
and the write itself carries the fence (docs/design.md#rule-3): the retries
of a batch are one UPDATE, a burial is one statement, and neither needs a
transaction of its own. Recording cannot fail (docs/design.md#rule-6): what
PostgreSQL refuses in an entry is written again as a minimal entry. A retry
the statement refused because an operator asked to cancel the job is buried
as "cancelled" instead (:func:`honour_cancels`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from django.db import DataError, connection, transaction

from django_jobretry.models import DeadReason
from django_jobretry.policy import Classification, Decision, GiveUp, Retry, RetryPolicy
from django_jobretry.services import transitions
from django_jobretry.services.cancel import bury_cancel_requested
from django_jobretry.services.claim_statements import Retrying, retry_params, schedule_retries_sql
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.decisions import decide
from django_jobretry.services.history import AttemptEntry
from django_jobretry.services.sql import ELAPSED_SQL, FENCE, JOB, loggable

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
    """What was written for a failed attempt; ``decision`` is None when it was stale or cancelled.

    ``cancelled_by`` names who asked to cancel the job when its retry was
    refused for that and it became a "cancelled" dead letter instead.
    """

    job: ClaimedJob
    policy: RetryPolicy
    entry: AttemptEntry
    decision: Decision | None
    dead_letter_id: int | None = None
    cancelled_by: str = ""


@dataclass(frozen=True)
class BatchedRetry:
    """A failure whose retry was decided before writing, so it can share a statement with others."""

    item: PendingFailure
    retry: Retry

    @property
    def retrying(self) -> Retrying:
        return Retrying(self.item.job, _with_delay(self.item.entry, self.retry), self.retry.delay)

    def written(self, kept: set[int]) -> WrittenFailure:
        """What was written, given the ids that still held their lease."""
        decision = self.retry if self.item.job.id in kept else None
        return WrittenFailure(self.item.job, self.item.policy, self.retrying.entry, decision)


@dataclass(frozen=True)
class Failure:
    """Locked state of a running job whose attempt failed."""

    #: Since the first attempt; None when the row's first_attempt_at is not a finite time.
    elapsed: timedelta | None


def split(pending: Sequence[PendingFailure]) -> tuple[list[BatchedRetry], list[PendingFailure]]:
    """The retries decided now (their policy has no ``retry_for``), and the failures to write alone."""
    batch: list[BatchedRetry] = []
    alone: list[PendingFailure] = []
    for item in pending:
        if item.policy.retry_for is None:
            decision = _decide(item, elapsed=None)
            if isinstance(decision, Retry):
                batch.append(BatchedRetry(item, decision))
                continue
        alone.append(item)
    return batch, alone


def write_failures(pending: Sequence[PendingFailure], history_limit: int) -> Iterator[WrittenFailure]:
    """Write each failure, yielding it once it is written (so a caller can forget it then).

    Each failure :func:`split` leaves alone is written on its own, then the
    retries together in one statement.
    """
    batch, alone = split(pending)
    for item in alone:
        yield _write_one(item, history_limit)
    yield from _write_batch(batch, history_limit)


def _write_batch(batch: Sequence[BatchedRetry], history_limit: int) -> Iterator[WrittenFailure]:
    """The retries of ``batch`` in one statement."""
    if not batch:
        return
    try:
        with statement_guard():
            kept = schedule_retries([retry.retrying for retry in batch], history_limit)
    except DataError:
        yield from write_refused(batch, history_limit)
        return
    with statement_guard():
        written = honour_cancels([retry.written(kept) for retry in batch], history_limit)
    yield from written


def write_refused(batch: Sequence[BatchedRetry], history_limit: int) -> Iterator[WrittenFailure]:
    """After a batch PostgreSQL refused: each alone, so only the refused entry falls back."""
    for retry in batch:
        yield _write_one(retry.item, history_limit)


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
        with statement_guard():
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
    return honour_cancels(
        [WrittenFailure(item.job, item.policy, entry, decision if kept else None)], history_limit
    )[0]


def honour_cancels(written: list[WrittenFailure], history_limit: int) -> list[WrittenFailure]:
    """``written`` again, with the retries refused because of a cancel request buried as "cancelled".

    One statement, only when some retry was refused (or stale): the common
    case costs nothing.
    """
    refused = [item for item in written if item.decision is None]
    if not refused:
        return written
    buried = bury_cancel_requested([(item.job, item.entry) for item in refused], history_limit)
    return [
        replace(item, dead_letter_id=buried[item.job.id][0], cancelled_by=buried[item.job.id][1])
        if item.job.id in buried
        else item
        for item in written
    ]


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


def statement_guard() -> AbstractContextManager[Any]:
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
    """Write ``retries`` in one fenced statement; returns the ids that still held their lease."""
    if not retries:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(schedule_retries_sql(), retry_params(retries, history_limit))
        return {row[0] for row in cursor.fetchall()}
