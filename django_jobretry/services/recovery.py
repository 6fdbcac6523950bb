"""Lease recovery: a job whose worker stopped heartbeating is retried or buried by its policy.

A lost lease is a retryable failure like any other (docs/design.md#rule-4):
the policy decides, with its backoff, its ``retry_for`` deadline and the
job's attempt limit, and the lost attempt (counted at claim) is recorded as
``lease_expired``. One transaction: the first statement locks the expired
leases with SKIP LOCKED, re-checking the condition on each row's latest
version (a job heartbeated meanwhile is skipped, one held by another
recoverer too); then one set-based statement writes the retries and one the
dead letters, on rows this transaction still holds. A job an operator asked
to cancel is not retried: the lock reads the request on the same latest
version, and the job becomes a "cancelled" dead letter, the lost attempt
recorded as ``lease_expired`` (a hung worker's job is never handed to another).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection, transaction

from django_jobretry import signals
from django_jobretry.models import DeadReason
from django_jobretry.policy import ErrorKind, GiveUp, GiveUpReason
from django_jobretry.registry import policy_for
from django_jobretry.services.decisions import decide
from django_jobretry.services.sql import (
    CLEAR_LEASE,
    DEAD,
    DEAD_COLUMNS,
    DIED,
    ELAPSED_SQL,
    JOB,
    counting_deaths,
    dead_letter_select,
    lease_expired_entry_sql,
    trimmed,
)

logger = logging.getLogger("django_jobretry")

#: Running jobs whose lease ran out, locked for this transaction.
EXPIRED_LEASES = f"""
    SELECT j.id, j.task_name, j.queue_name, j.policy_name, j.attempts, j.max_attempts, {ELAPSED_SQL},
           j.cancel_requested_at IS NOT NULL, j.cancel_requested_by
    FROM {JOB} AS j
    WHERE j.status = 'running' AND j.lease_expires_at < statement_timestamp()
    ORDER BY j.lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
"""

_LOCKED_ROWS = "unnest(%(ids)s::bigint[], %(values)s::text[]) AS d(id, value)"


@dataclass(frozen=True)
class Recovered:
    """A job whose lease had expired: retried after ``delay``, or buried for ``reason``."""

    id: int
    task_name: str
    queue_name: str
    attempt: int
    buried: bool
    dead_letter_id: int | None
    delay: timedelta | None = None
    reason: DeadReason | None = None
    #: Who asked to cancel the job, when that is why it was buried.
    cancelled_by: str = ""


def recover_expired(limit: int, history_limit: int) -> list[Recovered]:
    """Retry or bury up to ``limit`` jobs whose lease expired, as their policies decide."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(EXPIRED_LEASES, {"limit": limit})
        retries: dict[int, timedelta] = {}
        burials: dict[int, DeadReason] = {}
        found: dict[int, tuple[str, str, int]] = {}
        cancels: dict[int, str] = {}
        for row in cursor.fetchall():
            job_id, task_name, queue_name, policy_name, attempts, max_attempts, elapsed, cancelled, by = row
            found[job_id] = (task_name, queue_name, attempts)
            if cancelled:
                burials[job_id], cancels[job_id] = DeadReason.CANCELLED, by
                continue
            decision = decide(
                policy_for(task_name, policy_name),
                attempts,
                ErrorKind.RETRYABLE,
                elapsed=elapsed,
                max_attempts=max_attempts,
            )
            if isinstance(decision, GiveUp):
                deadline = decision.reason is GiveUpReason.DEADLINE
                burials[job_id] = DeadReason.DEADLINE if deadline else DeadReason.LEASE_EXPIRED
            else:
                retries[job_id] = decision.delay
        _retry(cursor, retries, history_limit)
        buried = _bury(cursor, burials, history_limit)
    return [
        Recovered(
            job_id,
            *found[job_id],
            buried=job_id in burials,
            dead_letter_id=buried.get(job_id),
            delay=retries.get(job_id),
            reason=burials.get(job_id),
            cancelled_by=cancels.get(job_id, ""),
        )
        for job_id in found
    ]


def _errors_with_lost_attempt(delay_sql: str | None) -> str:
    entry = lease_expired_entry_sql("j")
    if delay_sql is not None:
        entry = f"({entry} || jsonb_build_object('delay', {delay_sql}))"
    return f"(j.errors || jsonb_build_array({entry}))"


def _retry(cursor: Any, delays: dict[int, timedelta], history_limit: int) -> None:
    """Ready again after each job's backoff: durable, like any other retry."""
    if not delays:
        return
    errors = trimmed(_errors_with_lost_attempt("d.value::float8"), "%(history)s")
    cursor.execute(
        f"""
        UPDATE {JOB} AS j
        SET status = 'ready', run_at = statement_timestamp() + make_interval(secs => d.value::float8),
            {CLEAR_LEASE}, errors = {errors}
        FROM {_LOCKED_ROWS}
        WHERE j.id = d.id
        """,
        {
            "ids": list(delays),
            "values": [str(delay.total_seconds()) for delay in delays.values()],
            "history": history_limit,
        },
    )


def _bury(cursor: Any, reasons: dict[int, DeadReason], history_limit: int) -> dict[int, int]:
    """Into the dead letters; returns job id -> dead letter id."""
    if not reasons:
        return {}
    errors = trimmed(_errors_with_lost_attempt(None), "%(history)s")
    values = dead_letter_select(
        "gone",
        errors="gone.final_errors",
        reason="gone.reason",
        error_class="''",
        message=(
            f"CASE WHEN gone.reason = '{DeadReason.CANCELLED.value}' "
            "THEN 'cancelled by ' || gone.cancel_requested_by "
            "ELSE 'lease expired: worker ' || gone.lease_owner || ' stopped heartbeating' END"
        ),
    )
    cursor.execute(
        f"""
        WITH gone AS (
            DELETE FROM {JOB} AS j USING {_LOCKED_ROWS}
            WHERE j.id = d.id
            RETURNING j.*, d.value AS reason, {errors} AS final_errors
        ), dead AS (
            INSERT INTO {DEAD} ({DEAD_COLUMNS}) SELECT {values} FROM gone
            RETURNING job_id, id, {DIED}
        ), {counting_deaths("dead")}
        SELECT job_id, id FROM dead
        """,
        {
            "ids": list(reasons),
            "values": [reason.value for reason in reasons.values()],
            "history": history_limit,
        },
    )
    return dict(cursor.fetchall())


def announce(item: Recovered, sender: type) -> None:
    """Log and signal a lease recovery like any other retry or dead letter."""
    reason = item.reason.value if item.reason is not None else None
    delay = (item.delay or timedelta(0)).total_seconds()
    outcome = "lease_expired_dead" if item.buried else "lease_expired_retry"
    extra: dict[str, Any] = {
        "job_id": item.id,
        "task": item.task_name,
        "queue": item.queue_name,
        "attempt": item.attempt,
        "outcome": "cancelled" if item.cancelled_by else outcome,
        **({"reason": reason, "dead_letter_id": item.dead_letter_id} if item.buried else {"delay": delay}),
        **({"actor": item.cancelled_by} if item.cancelled_by else {}),
    }
    then = f"dead letter {item.dead_letter_id} ({reason})" if item.buried else f"retry in {delay:.3f}s"
    if item.cancelled_by:
        then = f"cancelled by {item.cancelled_by}, not retried: {then}"
    logger.warning(
        "job %s attempt %s (%s, queue %s) lost its lease; %s",
        item.id,
        item.attempt,
        item.task_name,
        item.queue_name,
        then,
        extra=extra,
    )
    common = {
        "job_id": item.id,
        "task_name": item.task_name,
        "queue_name": item.queue_name,
        "attempt": item.attempt,
    }
    if item.buried:
        signals.send(
            signals.job_dead_lettered,
            sender,
            extra,
            reason=reason,
            dead_letter_id=item.dead_letter_id,
            **common,
        )
    else:
        signals.send(signals.job_retry_scheduled, sender, extra, delay=item.delay, **common)
