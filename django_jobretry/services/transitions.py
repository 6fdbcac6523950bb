"""A job's database transitions: claim, finish, release, heartbeat; bury and revive.

Every worker write after the claim is fenced by (id, running, attempt, lease
token), so a worker that lost its lease changes nothing
(docs/design.md#rule-3). Times are always the database's
``statement_timestamp()`` (docs/design.md#rule-5). Burying a job and
reviving its dead letter are inverses, one statement each, side by side.
Writing a failed attempt back is in failure_writes.py, lease recovery in
recovery.py.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta
from typing import Any

from django.db import connection

from django_jobretry.conf import jobretry_settings
from django_jobretry.models import DeadReason
from django_jobretry.services.claim_statements import (
    CLAIM_PICKED,
    SUCCEED,
    Retrying,
    claimed_jobs,
    pick_sql,
    retry_params,
    succeed_and_claim_sql,
)
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.history import AttemptEntry
from django_jobretry.services.sql import (
    CLEAR_LEASE,
    DEAD,
    DEAD_COLUMNS,
    DIED,
    FENCE,
    JOB,
    REVIVED_COLUMNS,
    counting_deaths,
    dead_letter_select,
    revived_job_select,
    stamped,
    trimmed,
)

#: ClaimedJob is claim()'s result type, so it is exported here too.
__all__ = [
    "ClaimedJob",
    "bury",
    "bury_sql",
    "claim",
    "claim_sql",
    "fence_arrays",
    "heartbeat",
    "release",
    "revive",
    "succeed",
    "succeed_and_claim",
]


def claim_sql(*, filter_queues: bool, filter_tasks: bool = False, skip_ids: bool = False) -> str:
    """The claim statement; public so its plan can be tested and documented.

    Workers filter by queue only; the task and id filters serve ``testing.run_jobs``.
    """
    filters = (
        ("AND queue_name = ANY(%(queues)s) " if filter_queues else "")
        + ("AND task_name = ANY(%(tasks)s) " if filter_tasks else "")
        + ("AND id <> ALL(%(skip)s::bigint[])" if skip_ids else "")
    )
    return f"WITH picked AS ({pick_sql(filters)}) {CLAIM_PICKED}"


def _claim_params(
    owner: str, limit: int, lease_seconds: float, queues: Sequence[str] | None
) -> dict[str, Any]:
    return {"queues": list(queues or []), "limit": limit, "owner": owner, "lease": lease_seconds}


def claim(
    owner: str,
    limit: int,
    lease_seconds: float,
    queues: Sequence[str] | None,
    *,
    task_names: Sequence[str] | None = None,
    skip: Collection[int] = (),
) -> list[ClaimedJob]:
    """Claim up to ``limit`` due jobs; the attempt is counted here (docs/design.md#rule-1)."""
    sql = claim_sql(filter_queues=bool(queues), filter_tasks=bool(task_names), skip_ids=bool(skip))
    params = {
        **_claim_params(owner, limit, lease_seconds, queues),
        "tasks": list(task_names or []),
        "skip": list(skip),
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return claimed_jobs(cursor.fetchall())


def fence_arrays(jobs: Sequence[ClaimedJob]) -> dict[str, Any]:
    return {
        "ids": [job.id for job in jobs],
        "attempts": [job.attempt for job in jobs],
        "tokens": [job.token for job in jobs],
    }


FENCED_ROWS = "unnest(%(ids)s::bigint[], %(attempts)s::int[], %(tokens)s::uuid[]) AS d(id, attempts, token)"


def _succeed_params(jobs: Sequence[ClaimedJob], results: Mapping[int, str] | None) -> dict[str, Any]:
    results = results or {}
    return {**fence_arrays(jobs), "results": [results.get(job.id) for job in jobs]}


def succeed(jobs: Sequence[ClaimedJob], results: Mapping[int, str] | None = None) -> set[int]:
    """Mark finished attempts succeeded in one statement; returns the ids that still held their lease.

    ``results`` maps a job id to the JSON text its task returned (django.tasks
    keeps results; ``@job`` does not). The worker that ran the last attempt
    stays on the row as ``lease_owner``: who ran a finished job is history,
    and a task result lists it.
    """
    if not jobs:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(SUCCEED, _succeed_params(jobs, results))
        return {row[0] for row in cursor.fetchall()}


def succeed_and_claim(
    jobs: Sequence[ClaimedJob],
    results: Mapping[int, str] | None,
    *,
    owner: str,
    limit: int,
    lease_seconds: float,
    queues: Sequence[str] | None,
    retries: Sequence[Retrying] = (),
    history_limit: int | None = None,
) -> tuple[set[int], list[ClaimedJob]]:
    """:func:`succeed`, the ``retries`` and then :func:`claim`, in one statement: one round trip, one commit.

    Returns the ids (succeeded or retried) that still held their lease, and the jobs claimed.
    ``history_limit`` bounds the retried jobs' histories (default ``ERROR_HISTORY_LIMIT``).
    """
    params = {
        **_succeed_params(jobs, results),
        **_claim_params(owner, limit, lease_seconds, queues),
        **retry_params(
            retries,
            jobretry_settings.error_history_limit if history_limit is None else history_limit,
            prefix="retry_",
        ),
    }
    sql = succeed_and_claim_sql(filter_queues=bool(queues), with_retries=bool(retries))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    succeeded = set(rows[0][0] or ()) if rows else set()
    return succeeded, claimed_jobs([row[1:] for row in rows if row[1] is not None])


def release(jobs: Sequence[ClaimedJob]) -> set[int]:
    """Give back jobs claimed but never started: ready again, the attempt uncounted.

    Not a job an operator asked to cancel: it stays claimed, and lease
    recovery buries it as "cancelled" once the releasing worker is gone
    (services/recovery.py), so it never starts.
    """
    if not jobs:
        return set()
    sql = f"""
        UPDATE {JOB} AS j
        SET status = 'ready', attempts = j.attempts - 1, run_at = statement_timestamp(), {CLEAR_LEASE},
            first_attempt_at = CASE WHEN j.attempts = 1 THEN NULL ELSE j.first_attempt_at END
        FROM {FENCED_ROWS}
        WHERE j.id = d.id AND {FENCE} AND j.cancel_requested_at IS NULL
        RETURNING j.id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, fence_arrays(jobs))
        return {row[0] for row in cursor.fetchall()}


def heartbeat(jobs: Sequence[ClaimedJob], lease_seconds: float) -> dict[int, str]:
    """Extend the leases still held; returns id -> who asked to cancel it ("" if nobody).

    A missing id lost its lease. A cancel request rides on the heartbeat, so
    asking a running job to stop costs the worker no query of its own.
    """
    if not jobs:
        return {}
    sql = f"""
        UPDATE {JOB} AS j SET lease_expires_at = statement_timestamp() + make_interval(secs => %(lease)s)
        FROM {FENCED_ROWS}
        WHERE j.id = d.id AND {FENCE}
        RETURNING j.id, j.cancel_requested_by
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, {**fence_arrays(jobs), "lease": lease_seconds})
        return dict(cursor.fetchall())


def bury(job: ClaimedJob, entry: AttemptEntry, reason: DeadReason, history_limit: int) -> int | None:
    """Move the running job into the dead letters in one fenced statement.

    Returns the dead letter id, or None when the attempt no longer held its lease.
    """
    params: dict[str, Any] = {
        "id": job.id,
        "attempt": job.attempt,
        "token": job.token,
        "entry": json.dumps(entry),
        "reason": reason.value,
        "limit": history_limit,
        "error_class": entry["error_class"],
        "message": entry["message"],
    }
    with connection.cursor() as cursor:
        cursor.execute(bury_sql(), params)
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def bury_sql() -> str:
    """The statement of :func:`bury`; public so its plan can be tested."""
    errors = f"(gone.errors || jsonb_build_array({stamped('%(entry)s::jsonb')}))"
    values = dead_letter_select(
        "gone",
        errors=trimmed(errors, "%(limit)s"),
        reason="%(reason)s",
        error_class="%(error_class)s",
        message="%(message)s",
    )
    return f"""
        WITH gone AS (
            DELETE FROM {JOB} AS j
            USING (SELECT %(id)s::bigint AS id, %(attempt)s::int AS attempts, %(token)s::uuid AS token) AS d
            WHERE j.id = d.id AND {FENCE}
            RETURNING j.*
        ), dead AS (
            INSERT INTO {DEAD} ({DEAD_COLUMNS}) SELECT {values} FROM gone
            RETURNING id, {DIED}
        ), {counting_deaths("dead")}
        SELECT id FROM dead
    """


def revive(dead_letter_id: int, *, max_attempts: int, run_after: timedelta | None, actor: str) -> int | None:
    """The inverse of bury: the dead letter becomes a ready job, in one statement.

    The new job carries the history of its dead letter plus one
    :class:`~django_jobretry.services.history.RequeueEntry`. Returns the new
    job's id, or None when the dead letter no longer exists. A live job
    holding the same unique_key makes the INSERT fail (IntegrityError) and
    nothing changes.
    """
    run_at = "statement_timestamp() + make_interval(secs => %(delay)s)"
    values = revived_job_select("dead", run_at=run_at, max_attempts="%(max_attempts)s", actor="%(actor)s")
    sql = f"""
        WITH dead AS (DELETE FROM {DEAD} WHERE id = %(id)s RETURNING *)
        INSERT INTO {JOB} ({REVIVED_COLUMNS}) SELECT {values} FROM dead
        RETURNING id
    """
    params: dict[str, Any] = {
        "id": dead_letter_id,
        "delay": run_after.total_seconds() if run_after is not None else 0,
        "max_attempts": max_attempts,
        "actor": actor,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else int(row[0])
