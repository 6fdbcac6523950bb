"""Every statement that moves a job between states, each written once and named for what it does.

Read top to bottom, this is the job state machine: claim, succeed, retry,
release, heartbeat, recover, cancel; burial and revival, the moves between
a job and a dead letter, are in burial_sql.py. transitions.py,
failure_writes.py, recovery.py and cancel.py run them and read their rows
by column name. Every worker write after the claim carries the fence
(docs/design.md#rule-3), read when the statement is built, so a test's
negative control can break it; times are the database's
(docs/design.md#rule-5). Shared fragments are in sql.py.
"""

from __future__ import annotations

from django_jobretry.holds.sql import not_held
from django_jobretry.services.sql import (
    CLEAR_LEASE,
    ELAPSED_SQL,
    END_LEASE,
    FENCE,
    FENCED_ROWS,
    JOB,
    LOCKED_ROWS,
    ORIGINAL_JOB_ID,
    RETRY_WINDOW,
    lease_expired_entry_sql,
    stamped,
    trimmed,
)


# -- claim -----------------------------------------------------------------------------------
def pick_sql(filters: str = "") -> str:
    """Lock the next due jobs, in claim order, skipping those other workers lock and those held."""
    return f"""
        SELECT j.id FROM {JOB} AS j
        WHERE j.status = 'ready' AND j.run_at <= statement_timestamp() {filters}
          AND j.attempts < j.max_attempts {not_held("j")}
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    """


def claim_picked(also: str = "") -> str:
    """Claim the rows of ``picked``: the attempt is counted here (docs/design.md#rule-1).

    Its RETURNING columns are named like ClaimedJob's fields, plus the claim
    order's keys. ``also``: more ``column = value`` pairs for the SET list.
    """
    return f"""
    UPDATE {JOB} AS j
    SET status = 'running', attempts = j.attempts + 1, lease_owner = %(owner)s,{also}
        lease_token = gen_random_uuid(),
        lease_expires_at = statement_timestamp() + make_interval(secs => %(lease)s),
        started_at = statement_timestamp(),
        first_attempt_at = COALESCE(j.first_attempt_at, statement_timestamp())
    FROM picked WHERE j.id = picked.id
    RETURNING j.id, j.task_name, j.queue_name, j.policy_name, j.args AS raw_args, j.kwargs AS raw_kwargs,
              j.attempts AS attempt, j.max_attempts, j.lease_token AS token,
              {ORIGINAL_JOB_ID} AS original_job_id, j.requeue_count, j.schedule_name, j.snoozes,
              {RETRY_WINDOW}, j.trace_context,
              j.priority, extract(epoch FROM j.run_at)::float8 AS run_at_epoch
    """


CLAIM_PICKED = claim_picked()

#: Finished attempts succeeded, fenced; returns the ids that still held their lease, and when.
SUCCEED = f"""
    UPDATE {JOB} AS j SET status = 'succeeded', finished_at = statement_timestamp(),
        return_value = d.result::jsonb, {END_LEASE}
    FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(tokens)s::uuid[], %(results)s::text[])
        AS d(id, attempts, token, result)
    WHERE j.id = d.id AND {FENCE}
    RETURNING j.id, j.finished_at
"""


#: The ordinary claim's filter while limits are declared: limited jobs go through limit_sql.py.
NO_LANE = "AND limit_lane IS NULL "


def claim_sql(
    *, filter_queues: bool, filter_tasks: bool = False, skip_ids: bool = False, skip_lanes: bool = False
) -> str:
    """The claim. Workers filter by queue only; the task and id filters serve ``testing.run_jobs``."""
    filters = (
        (NO_LANE if skip_lanes else "")
        + ("AND queue_name = ANY(%(queues)s) " if filter_queues else "")
        + ("AND task_name = ANY(%(tasks)s) " if filter_tasks else "")
        + ("AND id <> ALL(%(skip)s::bigint[])" if skip_ids else "")
    )
    return f"WITH picked AS ({pick_sql(filters)}) {CLAIM_PICKED}"


def succeed_and_claim_sql(
    *, filter_queues: bool, with_retries: bool = False, skip_lanes: bool = False
) -> str:
    """SUCCEED, the retries (parameters prefixed ``retry_``) and the claim, as one statement.

    One row always comes back: ``ids``, the array of the ids whose outcome was
    written (NULL for none), the ``finished_at`` SUCCEED wrote and, beside
    them, one claimed job per row (NULLs when none was due). The parts touch
    disjoint rows (running ones, ready ones), so running them on one snapshot
    changes nothing any of them sees: a job made ready again here is not claimed.
    """
    filters = (NO_LANE if skip_lanes else "") + ("AND queue_name = ANY(%(queues)s)" if filter_queues else "")
    retried = f", retried AS ({schedule_retries_sql('retry_')})" if with_retries else ""
    kept = "SELECT id FROM done" + (" UNION ALL SELECT id FROM retried" if with_retries else "")
    return f"""
        WITH done AS ({SUCCEED}){retried}, picked AS ({pick_sql(filters)}), claimed AS ({CLAIM_PICKED})
        SELECT d.ids, statement_timestamp() AS finished_at, c.*
        FROM (SELECT array_agg(id) AS ids FROM ({kept}) AS k) AS d LEFT JOIN claimed AS c ON TRUE
    """


# -- retry -----------------------------------------------------------------------------------
def retry_sql(rows: str, where: str, *, entry: str, delay: str, history: str = "%(history)s") -> str:
    """Back to ready after ``delay`` seconds (durable backoff), ``entry`` last in the history.

    The one retry statement: the job rows ``j`` joined to ``rows`` that match
    ``where``. Never a job an operator asked to cancel: the condition is
    re-checked on the row's latest version, so a cancel committed while this
    statement waited for the row is honoured too; such an attempt is missing
    from what the statement returns, like a stale one, and
    cancel.bury_cancel_requested buries it.
    """
    errors = trimmed(f"(j.errors || jsonb_build_array({entry}))", history)
    return f"""
        UPDATE {JOB} AS j
        SET status = 'ready', run_at = statement_timestamp() + make_interval(secs => {delay}),
            {CLEAR_LEASE}, errors = {errors}
        FROM {rows}
        WHERE {where} AND j.cancel_requested_at IS NULL
        RETURNING j.id
    """


def schedule_retries_sql(prefix: str = "") -> str:
    """The retries of failed attempts, fenced, each with its entry and delay (failure_writes.retry_params)."""
    p = prefix
    rows = (
        f"unnest(%({p}ids)s::bigint[], %({p}attempts)s::int[], %({p}tokens)s::uuid[], "
        f"%({p}entries)s::jsonb[], %({p}delays)s::float8[]) AS d(id, attempts, token, entry, delay)"
    )
    return retry_sql(
        rows, f"j.id = d.id AND {FENCE}", entry=stamped("d.entry"), delay="d.delay", history=f"%({p}limit)s"
    )


def recovery_retry_sql() -> str:
    """The retries of lost leases (LOCKED_ROWS, value: the delay), the lost attempt recorded."""
    entry = f"({lease_expired_entry_sql('j')} || jsonb_build_object('delay', d.value::float8))"
    return retry_sql(LOCKED_ROWS, "j.id = d.id", entry=entry, delay="d.value::float8")


# -- locks, leases and cancel requests -------------------------------------------------------
def lock_attempt_sql() -> str:
    """Lock a running attempt (ONE_ATTEMPT without its entry), fenced, to read ``elapsed``."""
    return f"""
        SELECT {ELAPSED_SQL} AS elapsed FROM {JOB} AS j,
               (SELECT %(id)s::bigint AS id, %(attempt)s::int AS attempts, %(token)s::uuid AS token) AS d
        WHERE j.id = d.id AND {FENCE}
        FOR UPDATE OF j
    """


def release_sql() -> str:
    """Claimed attempts never started: ready again, the attempt uncounted; not a cancel-requested job."""
    return f"""
        UPDATE {JOB} AS j
        SET status = 'ready', attempts = j.attempts - 1, run_at = statement_timestamp(), {CLEAR_LEASE},
            first_attempt_at = CASE WHEN j.attempts = 1 THEN NULL ELSE j.first_attempt_at END
        FROM {FENCED_ROWS}
        WHERE j.id = d.id AND {FENCE} AND j.cancel_requested_at IS NULL
        RETURNING j.id
    """


def heartbeat_sql() -> str:
    """Extend the leases still held; returns each id and who asked to cancel it."""
    return f"""
        UPDATE {JOB} AS j SET lease_expires_at = statement_timestamp() + make_interval(secs => %(lease)s)
        FROM {FENCED_ROWS}
        WHERE j.id = d.id AND {FENCE}
        RETURNING j.id, j.cancel_requested_by
    """


#: Running jobs whose lease ran out, locked for this transaction (lease recovery).
EXPIRED_LEASES = f"""
    SELECT j.id, j.task_name, j.queue_name, j.policy_name, j.attempts, j.max_attempts,
           {ELAPSED_SQL} AS elapsed, j.cancel_requested_at IS NOT NULL AS cancelled, j.cancel_requested_by,
           j.lease_owner, {RETRY_WINDOW}
    FROM {JOB} AS j
    WHERE j.status = 'running' AND j.lease_expires_at < statement_timestamp()
    ORDER BY j.lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
"""

#: Lock the live jobs an operator cancels, in id order (two cancels cannot deadlock).
LOCK_FOR_CANCEL = f"SELECT id, status FROM {JOB} WHERE id = ANY(%(ids)s) ORDER BY id FOR UPDATE"

#: Ask the workers of running jobs to stop them; the first request's time is kept.
REQUEST_CANCEL = f"""
    UPDATE {JOB} SET cancel_requested_by = %(actor)s,
        cancel_requested_at = COALESCE(cancel_requested_at, statement_timestamp())
    WHERE id = ANY(%(ids)s) AND status = 'running'
"""
