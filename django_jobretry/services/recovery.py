"""Lease recovery: a job whose worker stopped heartbeating is retried or buried by its policy.

A lost lease is a retryable failure like any other (docs/design.md#rule-4):
the policy decides, with its backoff, its ``retry_for`` deadline and the
job's attempt limit, and the lost attempt (counted at claim) is recorded as
``lease_expired``. One transaction: the first statement locks the expired
leases with SKIP LOCKED, re-checking the condition on each row's latest
version (a job heartbeated meanwhile is skipped, one held by another
recoverer too); then one set-based statement writes the retries and one the
dead letters, on rows this transaction still holds. A job an operator asked to
cancel (the lock reads the request too) is buried as "cancelled" instead: a
hung worker's job is never handed to another.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection, transaction

from django_jobretry.models import DeadReason
from django_jobretry.policy import ErrorKind, GiveUp
from django_jobretry.registry import policy_for
from django_jobretry.services import burial_sql, statements
from django_jobretry.services.decisions import dead_reason, decide
from django_jobretry.services.history import AttemptEnd
from django_jobretry.services.job_lines import announce_dead, announce_retry
from django_jobretry.services.sql import named_rows

logger = logging.getLogger("django_jobretry")


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
    #: The worker that held the lease (``lease_owner``), which stopped heartbeating.
    lost_by: str = ""


def recover_expired(limit: int, history_limit: int) -> list[Recovered]:
    """Retry or bury up to ``limit`` jobs whose lease expired, as their policies decide."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statements.EXPIRED_LEASES, {"limit": limit})
        expired = named_rows(cursor)
        retries: dict[int, timedelta] = {}
        burials: dict[int, DeadReason] = {}
        for row in expired:
            if row["cancelled"]:
                burials[row["id"]] = DeadReason.CANCELLED
                continue
            decision = decide(
                policy_for(row["task_name"], row["policy_name"]),
                row["attempts"],
                ErrorKind.RETRYABLE,
                elapsed=row["elapsed"],
                max_attempts=row["max_attempts"],
                window=row["retry_window"],
            )
            if isinstance(decision, GiveUp):
                burials[row["id"]] = dead_reason(decision.reason, lease_lost=True)
            else:
                retries[row["id"]] = decision.delay
        _execute(cursor, statements.recovery_retry_sql(), retries, history_limit)
        buried = {
            dead["job_id"]: dead["dead_letter_id"]
            for dead in _execute(cursor, burial_sql.recovery_burial_sql(), burials, history_limit)
        }
    return [
        Recovered(
            row["id"],
            row["task_name"],
            row["queue_name"],
            row["attempts"],
            buried=row["id"] in burials,
            dead_letter_id=buried.get(row["id"]),
            delay=retries.get(row["id"]),
            reason=burials.get(row["id"]),
            cancelled_by=row["cancel_requested_by"] if row["cancelled"] else "",
            lost_by=row["lease_owner"],
        )
        for row in expired
    ]


def _execute(
    cursor: Any, sql: str, values: dict[int, timedelta] | dict[int, DeadReason], history_limit: int
) -> list[dict[str, Any]]:
    """``sql`` on the locked rows of ``values`` (job id -> delay or reason); the rows it returned."""
    if not values:
        return []
    as_text = [str(v.total_seconds()) if isinstance(v, timedelta) else v.value for v in values.values()]
    cursor.execute(sql, {"ids": list(values), "values": as_text, "history": history_limit})
    return named_rows(cursor)


def announce(item: Recovered, sender: type) -> None:
    """Log and signal a lease recovery like any other retry or dead letter."""
    line = "lost its lease (worker %s); %s"
    owner = item.lost_by or "unknown"
    actor: dict[str, Any] = {"actor": item.cancelled_by} if item.cancelled_by else {}
    if item.buried and item.reason is not None and item.dead_letter_id is not None:
        then = f"dead letter {item.dead_letter_id} ({item.reason.value})"
        if item.cancelled_by:
            then = f"cancelled by {item.cancelled_by}, not retried: {then}"
        outcome = "cancelled" if item.cancelled_by else "lease_expired_dead"
        announce_dead(
            sender,
            item,
            line,
            (owner, then),
            outcome=outcome,
            reason=item.reason.value,
            dead_letter_id=item.dead_letter_id,
            lost_by=owner,
            **actor,
        )
    elif item.delay is not None:
        announce_retry(
            sender,
            item,
            line,
            (owner, f"retry in {item.delay.total_seconds():.3f}s"),
            outcome="lease_expired_retry",
            level=logging.WARNING,
            reason=AttemptEnd.LEASE_EXPIRED.value,
            delay=item.delay,
            lost_by=owner,
        )
