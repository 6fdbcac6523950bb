"""Writing failed attempts back: a durable retry or a dead letter, fenced, in few round trips.

What a failure means depends on the row only through ``retry_for``: the time
since the first attempt, which is read under a row lock on the database's
clock (docs/design.md#rule-5). Every other decision is made once, by the
recorder, before writing, and the write itself carries the fence
(docs/design.md#rule-3): the retries of a batch are one UPDATE, a burial is
one statement, and neither needs a transaction of its own. Recording cannot
fail (docs/design.md#rule-6): what PostgreSQL refuses in an entry is written
again as a minimal entry. A retry the statement refused because an operator
asked to cancel the job is buried as "cancelled" instead (:func:`honour_cancels`).

At the end, the burial's inverse: :func:`revive` turns dead letters back into ready jobs, for
an operator's requeue (deadletters/chunks.py) and a policy's ``requeue_budget`` (record.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.db import DataError, connection, transaction

from django_jobretry.holds.breakers import count_failure
from django_jobretry.jobs import claimed, decisions, sql, statements
from django_jobretry.jobs.claimed import FailedAttempt
from django_jobretry.jobs.decisions import dead_reason, decide
from django_jobretry.jobs.history import DEFERRALS, AttemptEntry
from django_jobretry.jobs.recovery import bury_cancel_requested
from django_jobretry.jobs.sql import loggable, named_rows, statement_guard
from django_jobretry.policy import Defer, GiveUp, Retry

logger = logging.getLogger("django_jobretry")


def decided(attempt: FailedAttempt, *, elapsed: timedelta | None) -> FailedAttempt:
    """``attempt`` with its policy's decision; a retry's entries carry its delay."""
    job = attempt.job
    window = None if job.retry_window is None else job.retry_window - (time.monotonic() - job.claimed_at)
    decision = decide(
        attempt.policy,
        job.attempt,
        attempt.classification.kind,
        elapsed=elapsed,
        requested_delay=attempt.classification.requested_delay,
        max_attempts=job.max_attempts,
        window=window,
    )
    if isinstance(decision, Retry):
        seconds = decision.delay.total_seconds()
        entry: AttemptEntry = {**attempt.entry, "delay": seconds}
        fallback: AttemptEntry = {**attempt.fallback, "delay": seconds}
        return replace(attempt, decision=decision, entry=entry, fallback=fallback)
    return replace(attempt, decision=decision)


def write_failures(attempts: Sequence[FailedAttempt], history_limit: int) -> Iterator[FailedAttempt]:
    """Write each attempt, yielding what was written once it is (so a caller can forget it then).

    The retries decided already are written together in one statement, after
    the rest, each of which is written on its own.
    """
    for attempt in attempts:
        if attempt.retry is None or attempt.counted:
            yield write_one(attempt, history_limit)
    batch = [attempt for attempt in attempts if attempt.retry is not None and not attempt.counted]
    if not batch:
        return
    try:
        with statement_guard():
            kept = schedule_retries(retry_params(batch, history_limit))
    except DataError:  # PostgreSQL refused the batch: each alone, so only the refused entry falls back
        yield from (write_one(attempt, history_limit) for attempt in batch)
        return
    with statement_guard():
        yield from honour_cancels(written(batch, kept), history_limit)


def written(retries: Sequence[FailedAttempt], kept: set[int]) -> list[FailedAttempt]:
    """The retries as written, given the ids that still held their lease."""
    return [replace(retry, stale=retry.job.id not in kept) for retry in retries]


def write_one(attempt: FailedAttempt, history_limit: int) -> FailedAttempt:
    try:
        return _write(attempt, history_limit)
    except DataError as exc:
        logger.error(
            "could not store the error of job %s (%s); storing a minimal record",
            attempt.job.id,
            type(exc).__name__,
            extra={
                "job_id": attempt.job.id,
                "attempt": attempt.job.attempt,
                "outcome": "record_fallback",
                **loggable(exc),
            },
        )
        return _write(replace(attempt, entry=attempt.fallback), history_limit)


def _write(attempt: FailedAttempt, history_limit: int) -> FailedAttempt:
    if not attempt.counted:
        return _decide_and_record(attempt, history_limit)
    with transaction.atomic():  # the breaker's count commits with the failure, or not at all
        done = _decide_and_record(attempt, history_limit)
        breaker = attempt.policy.circuit
        if breaker is not None and not done.stale and not done.cancelled_by:
            count_failure(attempt.job.task_name, breaker, done.entry["error_class"])
    return done


def _decide_and_record(attempt: FailedAttempt, history_limit: int) -> FailedAttempt:
    if attempt.decision is not None:
        with statement_guard():
            return _record(attempt, history_limit)
    with transaction.atomic():  # decided now, on the locked row
        if attempt.entry["ended"] in DEFERRALS:  # the time snoozed so far, whether it is the probe
            settled = decisions.settle(attempt)
            return settled if settled.stale else _record(settled, history_limit)
        locked = lock_running(attempt)  # a retry_for policy: the elapsed time
        if locked is None:
            return replace(attempt, stale=True)
        return _record(decided(attempt, elapsed=locked.elapsed), history_limit)


def _record(attempt: FailedAttempt, history_limit: int) -> FailedAttempt:
    if isinstance(attempt.decision, Defer):
        kept = decisions.write(attempt, attempt.decision, history_limit)
        return honour_cancels(written([attempt], kept), history_limit)[0]
    if isinstance(attempt.decision, GiveUp):
        reason = dead_reason(attempt.decision.reason)
        burial = claimed.bury(attempt.job, attempt.entry, reason, history_limit)
        if burial is None:
            return replace(attempt, stale=True)
        return replace(attempt, dead_letter_id=burial.dead_letter_id, requeue_count=burial.requeue_count)
    kept = schedule_retries(retry_params([attempt], history_limit))
    return honour_cancels(written([attempt], kept), history_limit)[0]


def honour_cancels(attempts: list[FailedAttempt], history_limit: int) -> list[FailedAttempt]:
    """``attempts`` again, with the retries refused because of a cancel request buried as "cancelled".

    One statement, only when some retry was refused (or stale): the common
    case costs nothing.
    """
    refused = [attempt for attempt in attempts if attempt.stale]
    if not refused:
        return attempts
    buried = bury_cancel_requested([(attempt.job, attempt.entry) for attempt in refused], history_limit)
    return [
        replace(
            attempt,
            stale=False,
            dead_letter_id=buried[attempt.job.id][0],
            cancelled_by=buried[attempt.job.id][1],
        )
        if attempt.job.id in buried
        else attempt
        for attempt in attempts
    ]


@dataclass(frozen=True)
class LockedRun:
    """The running row of a failed attempt, locked until its retry or burial is written."""

    #: Since the first attempt; None when the row's first_attempt_at is not a finite time.
    elapsed: timedelta | None


def lock_running(attempt: FailedAttempt) -> LockedRun | None:
    """Lock the running job of ``attempt``, fenced; None if the lease was lost.

    Call inside ``transaction.atomic()``; the lock holds the row until the
    retry or dead-letter write in the same transaction.
    """
    params: dict[str, Any] = {
        "id": attempt.job.id,
        "attempt": attempt.job.attempt,
        "token": attempt.job.token,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql.lock_attempt_sql(), params)
        rows = named_rows(cursor)
    return LockedRun(rows[0]["elapsed"]) if rows else None


def retry_params(retries: Sequence[FailedAttempt], history_limit: int, prefix: str = "") -> dict[str, Any]:
    """The parameters of statements.schedule_retries_sql for ``retries`` (each decided a retry)."""
    return {
        f"{prefix}ids": [retry.job.id for retry in retries],
        f"{prefix}attempts": [retry.job.attempt for retry in retries],
        f"{prefix}tokens": [retry.job.token for retry in retries],
        f"{prefix}entries": [json.dumps(retry.entry) for retry in retries],
        f"{prefix}delays": [retry.retry.delay.total_seconds() if retry.retry else 0.0 for retry in retries],
        f"{prefix}limit": history_limit,
    }


def schedule_retries(params: dict[str, Any]) -> set[int]:
    """Write the retries of ``params`` (:func:`retry_params`) in one fenced statement.

    Returns the ids that still held their lease.
    """
    if not params["ids"]:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(statements.schedule_retries_sql(), params)
        return {row[0] for row in cursor.fetchall()}


# -- revive: dead letters back to ready jobs ----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Revival:
    """What became of one dead letter of a :func:`revive`: ``job_id`` None if a unique index refused it."""

    dead_letter_id: int
    job_id: int | None
    unique_key: str | None
    requeue_count: int
    #: Refused because a succeeded job holds the key for its unique_for: until when.
    taken_until: datetime | None


def revive(
    allowed: Mapping[int, int], *, run_after: timedelta | None, actor: str, guarded: bool = True
) -> list[Revival]:
    """The inverse of bury, for a set: each dead letter becomes a ready job, in one statement.

    ``allowed`` maps each dead letter's id to the max_attempts its job gets.
    Each new job carries the history of its dead letter plus one
    :class:`~django_jobretry.jobs.history.RequeueEntry`. Returns one
    Revival per dead letter that still existed, in id order; one whose key a
    live job holds (or a lower id of the set took) stays a dead letter, with
    ``job_id`` None. The caller holds the rows' locks (or accepts that one
    may be gone by the time the statement runs). ``guarded=False``: the
    caller knows no dead letter of the set has a unique_key or a schedule
    slot (statements.revive_sql).
    """
    ids = sorted(allowed)
    params: dict[str, Any] = {
        "ids": ids,
        "allowed": [allowed[i] for i in ids],
        "delay": run_after.total_seconds() if run_after is not None else 0,
        "actor": actor,
    }
    with connection.cursor() as cursor:
        cursor.execute(statements.revive_sql(guarded=guarded), params)
        return [Revival(*row) for row in cursor.fetchall()]
