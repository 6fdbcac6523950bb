"""The statements between a job and a dead letter: burial, and its inverse, revival.

A burial (a failure, a lost lease, a cancel) deletes job rows and inserts
them as dead letters in one statement; a revival does the reverse for a set
of dead letters with the unique-key guard. Both are written once here and
run by transitions.py, recovery.py, cancel.py and deadletters/chunks.py;
the rest of the state machine is in statements.py, shared fragments in
sql.py.
"""

from __future__ import annotations

from django_jobretry.models import DeadReason
from django_jobretry.policy import ErrorKind
from django_jobretry.services.history import AttemptEnd
from django_jobretry.services.sql import (
    DEAD,
    DEAD_COLUMNS,
    DIED,
    FENCE,
    FENCED_ENTRIES,
    HELD_IN_WINDOW,
    JOB,
    LOCKED_ROWS,
    ONE_ATTEMPT,
    REVIVED_COLUMNS,
    counting_deaths,
    dead_letter_select,
    event_entry_sql,
    lease_expired_entry_sql,
    revived_job_select,
    stamped,
    trimmed,
)


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
