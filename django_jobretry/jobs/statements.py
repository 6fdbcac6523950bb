"""Every statement that writes job and dead-letter rows, in state order, each written once.

Read top to bottom, this is the job state machine. Every worker write after the claim
carries the fence (docs/design.md#rule-3), read when the statement is built, so a negative
control can break it; times are the database's (docs/design.md#rule-5). The fragments (the
fence, the ready predicate, the claim order) and the locking reads are in sql.py.

| statement                      | transition                                  | run by                   |
|--------------------------------|---------------------------------------------|--------------------------|
| claim_sql, LIMITED_CLAIM       | ready -> running, the attempt counted       | claim.claim              |
| SUCCEED, succeed_and_claim_sql | running -> succeeded (retries, claim ride)  | claim.succeed            |
| schedule_retries_sql           | running -> ready after a backoff            | failures.schedule_retries|
| release_sql                    | running, not started -> ready, uncounted    | claim.release            |
| heartbeat_sql                  | running: lease extended, cancel read        | claim.heartbeat          |
| recovery_retry_sql             | running, lease lost -> ready                | recovery.recover_expired |
| REQUEST_CANCEL                 | running: cancel requested                   | recovery.cancel_jobs     |
| bury_sql                       | running -> dead letter                      | claim.bury               |
| recovery_burial_sql            | running, lease lost -> dead letter          | recovery.recover_expired |
| cancel_burial_sql              | ready, or a refused retry -> dead letter    | recovery.cancel_jobs     |
| revive_sql                     | dead letter -> ready (requeue)              | claim.revive             |
"""

from __future__ import annotations

from django_jobretry.holds.sql import held_seconds, not_held
from django_jobretry.jobs.history import AttemptEnd
from django_jobretry.jobs.sql import (
    CLAIM_ORDER,
    CLEAR_LEASE,
    DEAD,
    DEAD_COLUMNS,
    DIED,
    END_LEASE,
    FENCE,
    FENCED_ENTRIES,
    FENCED_ROWS,
    HELD_IN_WINDOW,
    JOB,
    LOCKED_ROWS,
    ONE_ATTEMPT,
    ORIGINAL_JOB_ID,
    READY,
    RETRY_WINDOW,
    REVIVED_COLUMNS,
    counting_deaths,
    dead_letter_select,
    event_entry_sql,
    lease_expired_entry_sql,
    revived_job_select,
    stamped,
    trimmed,
)
from django_jobretry.models import DeadReason
from django_jobretry.policy import ErrorKind


# -- claim: ready -> running ----------------------------------------------------------------------
def pick_sql(filters: str = "") -> str:
    """Lock the next due jobs, in claim order, skipping those other workers lock and those held."""
    return f"""
        SELECT j.id FROM {JOB} AS j
        WHERE {READY} {filters} {not_held("j")}
        ORDER BY {CLAIM_ORDER}
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

#: The ordinary claim's filter while limits are declared: limited jobs go through LIMITED_CLAIM.
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


#: Time a limited job was due but unclaimed, added as it is claimed.
WAITED = f" held_seconds = {held_seconds('j.run_at', 'statement_timestamp()')},"

LIMITED_CLAIM = f"""
    WITH pick AS MATERIALIZED (
        SELECT * FROM jobretry_pick_limited(%(limit)s, %(queues)s::text[], %(limits)s::jsonb)
    ),
    picked AS (SELECT id FROM pick WHERE id IS NOT NULL),
    claimed AS ({claim_picked(WAITED)})
    SELECT w.rate_wait, c.*
    FROM (SELECT min(wait) AS rate_wait FROM pick) AS w LEFT JOIN claimed AS c ON TRUE
"""

# -- succeed: running -> succeeded ----------------------------------------------------------------
#: Finished attempts succeeded, fenced; returns the ids that still held their lease, and when.
SUCCEED = f"""
    UPDATE {JOB} AS j SET status = 'succeeded', finished_at = statement_timestamp(),
        return_value = d.result::jsonb, {END_LEASE}
    FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(tokens)s::uuid[], %(results)s::text[])
        AS d(id, attempts, token, result)
    WHERE j.id = d.id AND {FENCE}
    RETURNING j.id, j.finished_at
"""


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


# -- retry: running -> ready ----------------------------------------------------------------------
def retry_sql(rows: str, where: str, *, entry: str, delay: str, history: str = "%(history)s") -> str:
    """Back to ready after ``delay`` seconds (durable backoff), ``entry`` last in the history.

    The one retry statement: the job rows ``j`` joined to ``rows`` that match
    ``where``. Never a job an operator asked to cancel: the condition is
    re-checked on the row's latest version, so a cancel committed while this
    statement waited for the row is honoured too; such an attempt is missing
    from what the statement returns, like a stale one, and
    recovery.bury_cancel_requested buries it.
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
    """The retries of failed attempts, fenced, each with its entry and delay (failures.retry_params)."""
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


# -- release, heartbeat and cancel requests: the lease --------------------------------------------
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


#: Ask the workers of running jobs to stop them; the first request's time is kept.
REQUEST_CANCEL = f"""
    UPDATE {JOB} SET cancel_requested_by = %(actor)s,
        cancel_requested_at = COALESCE(cancel_requested_at, statement_timestamp())
    WHERE id = ANY(%(ids)s) AND status = 'running'
"""


# -- bury: running or ready -> dead letter --------------------------------------------------------
def burial_sql(
    rows: str, where: str, *, entry: str, reason: str, message: str, error_class: str = "''"
) -> str:
    """Into the dead letters: the one burial statement, for a failure, a lost lease and a cancel.

    The job rows ``j`` joined to ``rows`` (a USING list, or "") that match
    ``where`` are deleted and inserted as dead letters, ``entry`` last in their
    history (trimmed to ``%(history)s``); ``reason``, ``message`` and
    ``error_class`` may read ``j`` and ``d``. Each death is counted in the same
    statement (counting_deaths). Returns, per burial: ``job_id``,
    ``dead_letter_id``, ``requeue_count``, ``task_name``, ``queue_name``,
    ``attempt`` and ``cancelled_by`` (who asked to cancel the job, "" if nobody).
    """
    errors = trimmed(f"(j.errors || jsonb_build_array({entry}))", "%(history)s")
    values = dead_letter_select(
        "gone",
        errors="gone.dead_errors",
        reason="gone.dead_reason",
        error_class="gone.dead_error_class",
        message="gone.dead_message",
    )
    return f"""
        WITH gone AS (
            DELETE FROM {JOB} AS j {f"USING {rows}" if rows else ""} WHERE {where}
            RETURNING j.*, {errors} AS dead_errors, {reason} AS dead_reason,
                      {error_class} AS dead_error_class, {message} AS dead_message
        ), dead AS (
            INSERT INTO {DEAD} ({DEAD_COLUMNS}) SELECT {values} FROM gone
            RETURNING job_id, id, requeue_count, attempts, {DIED}
        ), {counting_deaths("dead")}
        SELECT dead.job_id, dead.id AS dead_letter_id, dead.requeue_count, dead.task_name,
               dead.queue_name, dead.attempts AS attempt, gone.cancel_requested_by AS cancelled_by
        FROM dead JOIN gone ON gone.id = dead.job_id
    """


def bury_sql() -> str:
    """A failed attempt (ONE_ATTEMPT), fenced, for ``%(reason)s``, its error as the last error."""
    return burial_sql(
        ONE_ATTEMPT,
        f"j.id = d.id AND {FENCE}",
        entry=stamped("d.entry"),
        reason="%(reason)s",
        error_class="%(error_class)s",
        message="%(message)s",
    )


def recovery_burial_sql() -> str:
    """Lost leases (LOCKED_ROWS, value: the reason), the lost attempt recorded."""
    cancelled = DeadReason.CANCELLED.value
    message = (
        f"CASE WHEN d.value = '{cancelled}' THEN 'cancelled by ' || j.cancel_requested_by "
        "ELSE 'lease expired: worker ' || j.lease_owner || ' stopped heartbeating' END"
    )
    return burial_sql(
        LOCKED_ROWS, "j.id = d.id", entry=lease_expired_entry_sql("j"), reason="d.value", message=message
    )


def cancel_burial_sql(*, ready: bool) -> str:
    """Jobs as "cancelled" dead letters: ready ones by id (``ready``), or the refused retries.

    A refused retry (FENCED_ENTRIES) is one whose lease is still held and
    whose cancel was requested; its own entry is kept, without the delay.
    """
    if ready:
        ended = {"kind": ErrorKind.FATAL.value, "ended": AttemptEnd.CANCELLED.value}
        entry = event_entry_sql("j", message="%(message)s::text", worker="''", **ended)
        rows, where, message = "", "j.id = ANY(%(ids)s) AND j.status = 'ready'", "%(message)s"
    else:
        entry = stamped("(d.entry - 'delay')")
        rows, message = FENCED_ENTRIES, "'cancelled by ' || j.cancel_requested_by"
        where = f"j.id = d.id AND {FENCE} AND j.cancel_requested_at IS NOT NULL"
    return burial_sql(rows, where, entry=entry, reason=f"'{DeadReason.CANCELLED.value}'", message=message)


# -- revive: dead letter -> ready -----------------------------------------------------------------
def revive_sql(*, guarded: bool = True) -> str:
    """The inverse of a burial, for a set: the dead letters ``%(ids)s`` become ready jobs.

    ``%(allowed)s`` is each one's max_attempts (its current policy's). One
    row back per dead letter still there, in id order: ``job_id`` is NULL
    when a unique index refused it (a live job holds its key, or a lower id
    of the same set took it first: the INSERT runs in id order), or a job
    with its key succeeded less than the dead letter's ``unique_for`` ago:
    ``taken_until`` then says until when. Only the
    dead letters that became jobs are deleted; the new job names its dead
    letter in the RequeueEntry it carries, which is how the DELETE finds it.

    ``guarded=False`` leaves out ``ON CONFLICT DO NOTHING``, for a set of
    which no dead letter has a ``unique_key`` or a schedule slot: no unique
    index of the jobs table can refuse such rows, and the speculative
    insertion the guard needs costs a third of the statement.
    """
    run_at = "statement_timestamp() + make_interval(secs => %(delay)s)"
    values = revived_job_select("dead", run_at=run_at, max_attempts="dead.allowed", actor="%(actor)s")
    # A key that a succeeded job still holds (unique_for) is refused like one a live job holds.
    held = f"FROM {JOB} AS h WHERE {HELD_IN_WINDOW}"
    window = f"WHERE NOT EXISTS (SELECT 1 {held})" if guarded else ""
    return f"""
        WITH dead AS (
            SELECT d.*, m.allowed FROM {DEAD} AS d
            JOIN unnest(%(ids)s::bigint[], %(allowed)s::int[]) AS m(id, allowed) ON d.id = m.id
        ),
        revived AS (
            INSERT INTO {JOB} AS j ({REVIVED_COLUMNS}) SELECT {values} FROM dead {window} ORDER BY dead.id
            {"ON CONFLICT DO NOTHING" if guarded else ""}
            RETURNING j.id, (j.requeue_history -> -1 ->> 'dead_letter_id')::bigint AS dead_letter_id
        ),
        gone AS (
            DELETE FROM {DEAD} AS d USING revived
            WHERE d.id = ANY(%(ids)s::bigint[]) AND d.id = revived.dead_letter_id
        )
        SELECT dead.id AS dead_letter_id, revived.id AS job_id, dead.unique_key,
               dead.requeue_count + 1 AS requeue_count,
               CASE WHEN revived.id IS NULL AND dead.unique_key IS NOT NULL
                    THEN (SELECT max(h.finished_at) + dead.unique_for {held}) END AS taken_until
        FROM dead LEFT JOIN revived ON revived.dead_letter_id = dead.id
        ORDER BY dead.id
    """
