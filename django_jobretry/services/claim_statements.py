"""The claim's statements, shared by the claim alone and by the claim that also records successes.

A worker at ``--concurrency 1`` would otherwise pay two round trips and two
commits per job: one to record the success, one to claim the next job.
:data:`SUCCEED_AND_CLAIM` does both in one statement; each half is the same
SQL as when it runs alone, so the fence (docs/design.md#rule-3) and the
attempt counted at claim (docs/design.md#rule-1) are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.sql import END_LEASE, FENCE, JOB

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


def succeed_and_claim_sql(*, filter_queues: bool) -> str:
    """SUCCEED, then the claim, as one statement; public so its plan can be tested.

    One row always comes back: the array of ids that succeeded (NULL for none)
    and, beside it, one claimed job per row (NULLs when none was due). The two
    halves touch disjoint rows (running ones, ready ones), so running them
    on one snapshot changes nothing either of them sees.
    """
    filters = "AND queue_name = ANY(%(queues)s)" if filter_queues else ""
    return f"""
        WITH done AS ({SUCCEED}), picked AS ({pick_sql(filters)}), claimed AS ({CLAIM_PICKED})
        SELECT d.ids, c.* FROM (SELECT array_agg(id) AS ids FROM done) AS d LEFT JOIN claimed AS c ON TRUE
    """


def claimed_jobs(rows: Sequence[Sequence[Any]]) -> list[ClaimedJob]:
    """The rows CLAIM_PICKED returned, in claim order (priority, then run_at, then id)."""
    # run_at as epoch seconds: a '-infinity' row must not fail the batch's decoding.
    ordered = sorted(rows, key=lambda row: (-row[11], row[12], row[0]))
    # Arguments stay undecoded here: the runner decodes them, one job at a time.
    return [ClaimedJob(*row[:11]) for row in ordered]
