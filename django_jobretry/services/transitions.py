"""A job's database transitions: claim, finish, fail, release, heartbeat; bury and revive.

Every worker write after the claim is fenced by (id, running, attempt, lease
token), so a worker that lost its lease changes nothing
(docs/design.md#rule-3). Times are always the database's
``statement_timestamp()`` (docs/design.md#rule-5). Burying a job and
reviving its dead letter are inverses, one statement each, side by side.
Lease recovery is in recovery.py.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection

from django_jobretry.models import DeadReason
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.history import AttemptEntry
from django_jobretry.services.sql import (
    CLEAR_LEASE,
    DEAD,
    DEAD_COLUMNS,
    ELAPSED_SQL,
    END_LEASE,
    FENCE,
    JOB,
    REVIVED_COLUMNS,
    dead_letter_select,
    revived_job_select,
    stamped,
    trimmed,
)

#: ClaimedJob is claim()'s result type, so it is exported here too.
__all__ = [
    "ClaimedJob",
    "Failure",
    "bury",
    "claim",
    "claim_sql",
    "heartbeat",
    "lock_failed",
    "release",
    "revive",
    "schedule_retry",
    "succeed",
]


@dataclass(frozen=True)
class Failure:
    """Locked state of a running job whose attempt failed."""

    #: Since the first attempt; None when the row's first_attempt_at is not a finite time.
    elapsed: timedelta | None


#: The first job id of the requeue chain: the claim must not fail on a row
#: whose history was edited by hand, so anything but a plain id means "this job".
ORIGINAL_JOB_ID = (
    "CASE WHEN (j.requeue_history -> 0 ->> 'job_id') ~ '^[0-9]{1,18}$' "
    "THEN (j.requeue_history -> 0 ->> 'job_id')::bigint ELSE j.id END"
)


def claim_sql(*, filter_queues: bool, filter_tasks: bool = False, skip_ids: bool = False) -> str:
    """The claim statement; public so its plan can be tested and documented.

    Workers filter by queue only; the task and id filters serve ``testing.run_jobs``.
    """
    filters = (
        ("AND queue_name = ANY(%(queues)s) " if filter_queues else "")
        + ("AND task_name = ANY(%(tasks)s) " if filter_tasks else "")
        + ("AND id <> ALL(%(skip)s::bigint[])" if skip_ids else "")
    )
    return f"""
        WITH picked AS (
            SELECT id FROM {JOB}
            WHERE status = 'ready' AND run_at <= statement_timestamp() {filters}
              AND attempts < max_attempts
            ORDER BY priority DESC, run_at, id
            LIMIT %(limit)s
            FOR UPDATE SKIP LOCKED
        )
        UPDATE {JOB} AS j
        SET status = 'running', attempts = j.attempts + 1, lease_owner = %(owner)s,
            lease_token = gen_random_uuid(),
            lease_expires_at = statement_timestamp() + make_interval(secs => %(lease)s),
            started_at = statement_timestamp(),
            first_attempt_at = COALESCE(j.first_attempt_at, statement_timestamp())
        FROM picked WHERE j.id = picked.id
        RETURNING j.id, j.task_name, j.queue_name, j.policy_name, j.args, j.kwargs, j.attempts,
                  j.max_attempts, j.lease_token,
                  {ORIGINAL_JOB_ID}, j.requeue_count,
                  j.priority, extract(epoch FROM j.run_at)::float8
    """


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
    params: dict[str, Any] = {
        "queues": list(queues or []),
        "tasks": list(task_names or []),
        "skip": list(skip),
        "limit": limit,
        "owner": owner,
        "lease": lease_seconds,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    # run_at as epoch seconds: a '-infinity' row must not fail the batch's decoding.
    rows.sort(key=lambda row: (-row[11], row[12], row[0]))
    # Arguments stay undecoded here: the runner decodes them, one job at a time.
    return [ClaimedJob(*row[:11]) for row in rows]


def _fence_arrays(jobs: Sequence[ClaimedJob]) -> dict[str, Any]:
    return {
        "ids": [job.id for job in jobs],
        "attempts": [job.attempt for job in jobs],
        "tokens": [job.token for job in jobs],
    }


_FENCED_ROWS = "unnest(%(ids)s::bigint[], %(attempts)s::int[], %(tokens)s::uuid[]) AS d(id, attempts, token)"


def succeed(jobs: Sequence[ClaimedJob], results: Mapping[int, str] | None = None) -> set[int]:
    """Mark finished attempts succeeded in one statement; returns the ids that still held their lease.

    ``results`` maps a job id to the JSON text its task returned (django.tasks
    keeps results; ``@job`` does not). The worker that ran the last attempt
    stays on the row as ``lease_owner``: who ran a finished job is history,
    and a task result lists it.
    """
    if not jobs:
        return set()
    results = results or {}
    sql = f"""
        UPDATE {JOB} AS j SET status = 'succeeded', finished_at = statement_timestamp(),
            return_value = d.result::jsonb, {END_LEASE}
        FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(tokens)s::uuid[], %(results)s::text[])
            AS d(id, attempts, token, result)
        WHERE j.id = d.id AND {FENCE}
        RETURNING j.id
    """
    params = {**_fence_arrays(jobs), "results": [results.get(job.id) for job in jobs]}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {row[0] for row in cursor.fetchall()}


def release(jobs: Sequence[ClaimedJob]) -> set[int]:
    """Give back jobs claimed but never started: ready again, the attempt uncounted."""
    if not jobs:
        return set()
    sql = f"""
        UPDATE {JOB} AS j
        SET status = 'ready', attempts = j.attempts - 1, run_at = statement_timestamp(), {CLEAR_LEASE},
            first_attempt_at = CASE WHEN j.attempts = 1 THEN NULL ELSE j.first_attempt_at END
        FROM {_FENCED_ROWS}
        WHERE j.id = d.id AND {FENCE}
        RETURNING j.id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, _fence_arrays(jobs))
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
        FROM {_FENCED_ROWS}
        WHERE j.id = d.id AND {FENCE}
        RETURNING j.id, j.cancel_requested_by
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, {**_fence_arrays(jobs), "lease": lease_seconds})
        return dict(cursor.fetchall())


def lock_failed(job: ClaimedJob) -> Failure | None:
    """Lock a running job for recording its failure; None if the lease was lost.

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


def schedule_retry(job: ClaimedJob, entry: AttemptEntry, delay: timedelta, history_limit: int) -> None:
    """Back to ready with a future run_at (durable backoff); the row is locked by lock_failed."""
    errors = f"(j.errors || jsonb_build_array({stamped('%(entry)s::jsonb')}))"
    sql = f"""
        UPDATE {JOB} AS j
        SET status = 'ready', run_at = statement_timestamp() + make_interval(secs => %(delay)s),
            {CLEAR_LEASE},
            errors = {trimmed(errors, "%(limit)s")}
        WHERE j.id = %(id)s
    """
    params: dict[str, Any] = {
        "entry": json.dumps(entry),
        "delay": delay.total_seconds(),
        "limit": history_limit,
        "id": job.id,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def bury(job: ClaimedJob, entry: AttemptEntry, reason: DeadReason, history_limit: int) -> int:
    """Move the job into the dead letters in one statement; returns the dead letter id."""
    errors = f"(gone.errors || jsonb_build_array({stamped('%(entry)s::jsonb')}))"
    values = dead_letter_select(
        "gone",
        errors=trimmed(errors, "%(limit)s"),
        reason="%(reason)s",
        error_class="%(error_class)s",
        message="%(message)s",
    )
    sql = f"""
        WITH gone AS (DELETE FROM {JOB} WHERE id = %(id)s RETURNING *)
        INSERT INTO {DEAD} ({DEAD_COLUMNS}) SELECT {values} FROM gone
        RETURNING id
    """
    params: dict[str, Any] = {
        "id": job.id,
        "entry": json.dumps(entry),
        "reason": reason.value,
        "limit": history_limit,
        "error_class": entry["error_class"],
        "message": entry["message"],
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        raise RuntimeError(f"job {job.id} vanished while locked; bury() must follow lock_failed()")
    return int(row[0])


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
