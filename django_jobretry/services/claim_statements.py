"""The statements of the worker's loop: the claim, and the outcomes that ride on it.

A worker at ``--concurrency 1`` would otherwise pay two round trips and two
commits per job: one to record the success, one to claim the next job.
:func:`succeed_and_claim_sql` does both in one statement, with the retries
of the failures taken in the same pass; each part is the same SQL as when it
runs alone, so the fence (docs/design.md#rule-3) and the attempt counted at
claim (docs/design.md#rule-1) are unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.history import AttemptEntry
from django_jobretry.services.sql import CLEAR_LEASE, END_LEASE, FENCE, JOB, stamped, trimmed

#: The first job id of the requeue chain: the claim must not fail on a row
#: whose history was edited by hand, so anything but a plain id means "this job".
ORIGINAL_JOB_ID = (
    "CASE WHEN (j.requeue_history -> 0 ->> 'job_id') ~ '^[0-9]{1,18}$' "
    "THEN (j.requeue_history -> 0 ->> 'job_id')::bigint ELSE j.id END"
)


def pick_sql(filters: str = "") -> str:
    """Lock the next due jobs, in claim order, skipping those other workers hold."""
    return f"""
        SELECT id FROM {JOB}
        WHERE status = 'ready' AND run_at <= statement_timestamp() {filters}
          AND attempts < max_attempts
        ORDER BY priority DESC, run_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    """


#: Claim the rows of ``picked``: the attempt is counted here (docs/design.md#rule-1).
#: Its RETURNING columns are what :func:`claimed_jobs` decodes.
CLAIM_PICKED = f"""
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

#: Finished attempts succeeded, fenced; returns the ids that still held their lease.
SUCCEED = f"""
    UPDATE {JOB} AS j SET status = 'succeeded', finished_at = statement_timestamp(),
        return_value = d.result::jsonb, {END_LEASE}
    FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(tokens)s::uuid[], %(results)s::text[])
        AS d(id, attempts, token, result)
    WHERE j.id = d.id AND {FENCE}
    RETURNING j.id
"""


@dataclass(frozen=True)
class Retrying:
    """A failed attempt to write back as ready again after ``delay``, with ``entry`` in its history."""

    job: ClaimedJob
    entry: AttemptEntry
    delay: timedelta


def schedule_retries_sql(prefix: str = "") -> str:
    """Back to ready with a future run_at (durable backoff), fenced; :func:`retry_params` binds it.

    Never for a job an operator asked to cancel: the condition is re-checked
    on the row's latest version, so a cancel committed while this statement
    waited for the row is honoured too. Such an attempt is missing from what
    the statement returns, like a stale one; services/cancel.py's
    ``bury_cancel_requested`` tells the two apart and buries it.
    Built at call time, as the fence may be broken on purpose by a test's negative control.
    """
    errors = f"(j.errors || jsonb_build_array({stamped('d.entry')}))"
    return f"""
        UPDATE {JOB} AS j
        SET status = 'ready', run_at = statement_timestamp() + make_interval(secs => d.delay),
            {CLEAR_LEASE},
            errors = {trimmed(errors, f"%({prefix}limit)s")}
        FROM unnest(%({prefix}ids)s::bigint[], %({prefix}attempts)s::int[], %({prefix}tokens)s::uuid[],
                    %({prefix}entries)s::jsonb[], %({prefix}delays)s::float8[])
             AS d(id, attempts, token, entry, delay)
        WHERE j.id = d.id AND {FENCE} AND j.cancel_requested_at IS NULL
        RETURNING j.id
    """


def retry_params(retries: Sequence[Retrying], history_limit: int, prefix: str = "") -> dict[str, Any]:
    return {
        f"{prefix}ids": [retry.job.id for retry in retries],
        f"{prefix}attempts": [retry.job.attempt for retry in retries],
        f"{prefix}tokens": [retry.job.token for retry in retries],
        f"{prefix}entries": [json.dumps(retry.entry) for retry in retries],
        f"{prefix}delays": [retry.delay.total_seconds() for retry in retries],
        f"{prefix}limit": history_limit,
    }


def succeed_and_claim_sql(*, filter_queues: bool, with_retries: bool = False) -> str:
    """SUCCEED, the retries (parameters prefixed ``retry_``) and the claim, as one statement.

    One row always comes back: the array of the ids whose outcome was written
    (NULL for none) and, beside it, one claimed job per row (NULLs when none
    was due). The parts touch disjoint rows (running ones, ready ones), so
    running them on one snapshot changes nothing any of them sees: a job
    made ready again here is not claimed by this statement.
    """
    filters = "AND queue_name = ANY(%(queues)s)" if filter_queues else ""
    retried = f", retried AS ({schedule_retries_sql('retry_')})" if with_retries else ""
    kept = "SELECT id FROM done" + (" UNION ALL SELECT id FROM retried" if with_retries else "")
    return f"""
        WITH done AS ({SUCCEED}){retried}, picked AS ({pick_sql(filters)}), claimed AS ({CLAIM_PICKED})
        SELECT d.ids, c.* FROM (SELECT array_agg(id) AS ids FROM ({kept}) AS k) AS d
        LEFT JOIN claimed AS c ON TRUE
    """


def claimed_jobs(rows: Sequence[Sequence[Any]]) -> list[ClaimedJob]:
    """The rows CLAIM_PICKED returned, in claim order (priority, then run_at, then id)."""
    # run_at as epoch seconds: a '-infinity' row must not fail the batch's decoding.
    ordered = sorted(rows, key=lambda row: (-row[11], row[12], row[0]))
    # Arguments stay undecoded here: the runner decodes them, one job at a time.
    return [ClaimedJob(*row[:11]) for row in ordered]
