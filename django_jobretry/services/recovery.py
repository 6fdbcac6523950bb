"""Lease recovery: jobs whose worker stopped heartbeating run again, or die.

One statement picks the expired leases with SKIP LOCKED and re-checks the
condition on each row's latest version, never read-then-write by id
(docs/design.md#rule-4). The lost attempt was counted at claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from django_jobretry.models import DeadReason
from django_jobretry.services.sql import (
    CLEAR_LEASE,
    DEAD,
    DEAD_COLUMNS,
    JOB,
    dead_letter_select,
    lease_expired_entry_sql,
    trimmed,
)

#: Running jobs whose lease ran out; the lock re-checks the condition on the
#: row's latest version, so a job heartbeated meanwhile is skipped.
EXPIRED_LEASES = f"""
    SELECT id FROM {JOB}
    WHERE status = 'running' AND lease_expires_at < statement_timestamp()
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
"""


@dataclass(frozen=True)
class Recovered:
    """A job whose lease had expired: made ready again, or buried when out of attempts."""

    id: int
    task_name: str
    queue_name: str
    attempt: int
    buried: bool
    dead_letter_id: int | None


def recover_expired(limit: int, history_limit: int) -> list[Recovered]:
    """Pick expired leases with SKIP LOCKED, retry or bury each, in one statement.

    The history entry of the lost attempt says the lease expired and which
    worker held it.
    """
    errors = trimmed(f"(j.errors || jsonb_build_array({lease_expired_entry_sql('j')}))", "%(history)s")
    buried_values = dead_letter_select(
        "gone",
        errors="gone.final_errors",
        reason="%(reason)s",
        error_class="''",
        message="'lease expired: worker ' || gone.lease_owner || ' stopped heartbeating'",
    )
    sql = f"""
        WITH expired AS ({EXPIRED_LEASES}),
        retried AS (
            UPDATE {JOB} AS j SET status = 'ready', run_at = statement_timestamp(), {CLEAR_LEASE},
                   errors = {errors}
            FROM expired WHERE j.id = expired.id AND j.attempts < j.max_attempts
            RETURNING j.id, j.task_name, j.queue_name, j.attempts
        ),
        gone AS (
            DELETE FROM {JOB} AS j USING expired
            WHERE j.id = expired.id AND j.attempts >= j.max_attempts
            RETURNING j.*, {errors} AS final_errors
        ),
        buried AS (
            INSERT INTO {DEAD} ({DEAD_COLUMNS}) SELECT {buried_values} FROM gone
            RETURNING id, job_id, task_name, queue_name, attempts
        )
        SELECT id, task_name, queue_name, attempts, false, NULL::bigint FROM retried
        UNION ALL SELECT job_id, task_name, queue_name, attempts, true, id FROM buried
    """
    params: dict[str, Any] = {
        "limit": limit,
        "history": history_limit,
        "reason": DeadReason.LEASE_EXPIRED.value,
    }
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [Recovered(*row) for row in cursor.fetchall()]
