"""SQL fragments shared by the job transitions.

Raw SQL here is deliberate: each transition is one statement that both picks
and changes its rows (claim, heartbeat, recovery, bury, revive), which the
ORM cannot say.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from django.db import connection, transaction

from django_jobretry.jobs.history import REQUEUE_ERROR_CHARS
from django_jobretry.models import DeadLetter, Death, Job

JOB = Job._meta.db_table
DEAD = DeadLetter._meta.db_table
DEATHS = Death._meta.db_table

#: The fence every worker write carries (docs/design.md#rule-3): same job,
#: still running, same attempt, same lease token.
FENCE = "j.status = 'running' AND j.attempts = d.attempts AND j.lease_token = d.token"

#: The claim order: the highest priority, then the longest due, then the oldest (claimed.claimed_jobs
#: sorts claimed rows the same way; jobretry_pick_limited walks each lane in it).
CLAIM_ORDER = "j.priority DESC, j.run_at, j.id"


def held_seconds(since: str, until: str) -> str:
    """``held_seconds`` plus the time a ready job ``j`` was due but held, from ``since`` to ``until``.

    Only after a first attempt: ``retry_for`` is measured from it, so time
    held before it changes nothing.
    """
    start = f"GREATEST({since}, j.run_at, j.first_attempt_at)"
    return (
        f"j.held_seconds + CASE WHEN j.first_attempt_at IS NULL OR {start} >= {until} THEN 0 "
        f"ELSE extract(epoch FROM {until} - {start})::float8 END"
    )


# Which rows a statement of statements.py acts on, as the table ``d`` beside the job rows ``j``.
#: One attempt, fenced by id, attempt and lease token, with the history entry it ends with.
ONE_ATTEMPT = (
    "(SELECT %(id)s::bigint AS id, %(attempt)s::int AS attempts, %(token)s::uuid AS token, "
    "%(entry)s::jsonb AS entry) AS d"
)
#: One attempt, fenced, without an entry (a locking read, a progress write).
ONE_FENCED = "(SELECT %(id)s::bigint AS id, %(attempt)s::int AS attempts, %(token)s::uuid AS token) AS d"
#: Many attempts, fenced, as claimed.fence_arrays binds them.
FENCED_ROWS = "unnest(%(ids)s::bigint[], %(attempts)s::int[], %(tokens)s::uuid[]) AS d(id, attempts, token)"
#: Many attempts, fenced, each with its history entry (bury_cancel_requested).
FENCED_ENTRIES = (
    "unnest(%(ids)s::bigint[], %(attempts)s::int[], %(tokens)s::uuid[], %(entries)s::jsonb[]) "
    "AS d(id, attempts, token, entry)"
)
#: Rows this transaction already holds locked, each with one text value (recovery's delay or reason).
LOCKED_ROWS = "unnest(%(ids)s::bigint[], %(values)s::text[]) AS d(id, value)"

#: SQL for "time since the job's first attempt", less the time it was held by a pause
#: or a breaker (held_seconds), never negative; NULL before a first attempt.
#: The column holds only instants Python can read (the jobretry_job_first_attempt_at_holdable
#: constraint).
ELAPSED_SQL = (
    "GREATEST(statement_timestamp() - j.first_attempt_at - make_interval(secs => j.held_seconds), "
    "interval '0')"
)


#: Leaving "running" ends the lease, and with it any cancel request for that run.
END_LEASE = (
    "lease_token = NULL, lease_expires_at = NULL, cancel_requested_by = '', cancel_requested_at = NULL"
)
#: The same, forgetting the worker too: the job will run again, on some other worker.
CLEAR_LEASE = f"lease_owner = '', {END_LEASE}"

#: The succeeded job ``h`` has the key of the dead letter ``dead`` and ended less than the dead
#: letter's ``unique_for`` ago (database clock): a requeue must not run that work again yet.
HELD_IN_WINDOW = (
    "h.unique_key = dead.unique_key AND h.status = 'succeeded' "
    "AND h.finished_at > statement_timestamp() - dead.unique_for"
)

#: What a job is, whichever table it is in: copied as-is when a job dies
#: (bury) and when its dead letter is requeued (revive).
CARRIED_COLUMNS = (
    *("task_name", "queue_name", "policy_name", "priority", "args", "kwargs", "unique_key", "unique_for"),
    *("schedule_name", "schedule_slot", "limit_lane", "trace_context", "run_after", "flow_step_id"),
)

#: How far the job's last attempt got (models/progress.py): kept by a burial, not by a requeue.
PROGRESS_COLUMNS = ("progress_done", "progress_total", "progress_note", "progress_at")
#: A claim clears them: each attempt reports its own.
NO_PROGRESS = ", ".join(f"{column} = NULL" for column in PROGRESS_COLUMNS)

#: A DeadLetter row, in the order :func:`dead_letter_select` gives its values.
DEAD_COLUMNS = ", ".join(
    (
        "job_id",
        *CARRIED_COLUMNS,
        *PROGRESS_COLUMNS,
        *("reason", "attempts", "max_attempts", "errors", "last_error_class", "last_error"),
        *("requeue_count", "requeue_history", "enqueued_at", "first_attempt_at", "dead_at"),
    )
)

#: The Job row a requeue inserts, in the order :func:`revived_job_select` gives its values.
REVIVED_COLUMNS = ", ".join(
    (
        *CARRIED_COLUMNS,
        *("status", "run_at", "attempts", "max_attempts", "errors"),
        *("lease_owner", "requeue_count", "requeue_history", "enqueued_at"),
    )
)


#: Seconds from now until the job ``j``'s retries must stop (its schedule's next slot); NULL: never.
RETRY_WINDOW = "extract(epoch FROM j.retry_until - statement_timestamp())::float8 AS retry_window"

#: What a burial's INSERT INTO the dead letters returns, besides what its caller reads,
#: for :func:`counting_deaths`.
DIED = "task_name, queue_name, reason, last_error_class, dead_at"


def counting_deaths(dead: str) -> str:
    """A CTE appending one Death row per row of the CTE ``dead`` (an INSERT ... RETURNING DIED).

    Part of each burial statement, so a death is counted in the statement that
    makes the dead letter, and rolled back with it (models/dead_letter.py).
    """
    return (
        f"died AS (INSERT INTO {DEATHS} (task_name, queue_name, reason, error_class, died_at) "
        f"SELECT task_name, queue_name, reason, last_error_class, dead_at FROM {dead})"
    )


def _carried(source: str, columns: tuple[str, ...] = CARRIED_COLUMNS) -> str:
    return ", ".join(f"{source}.{column}" for column in columns)


def dead_letter_select(source: str, *, errors: str, reason: str, error_class: str, message: str) -> str:
    """The SELECT list burying the job row ``source``: DEAD_COLUMNS, in order."""
    return (
        f"{source}.id, {_carried(source)}, {_carried(source, PROGRESS_COLUMNS)}, {reason}, "
        f"{source}.attempts, {source}.max_attempts, {errors}, "
        f"{error_class}, {message}, {source}.requeue_count, {source}.requeue_history, "
        f"{source}.enqueued_at, {source}.first_attempt_at, statement_timestamp()"
    )


def revived_job_select(source: str, *, run_at: str, max_attempts: str, actor: str) -> str:
    """The SELECT list turning the dead-letter row ``source`` into a ready job: REVIVED_COLUMNS.

    The attempt history comes along: a job that dies again, and a task
    result polled across the requeue, still show why the earlier attempts
    failed (docs/decisions/0006-a-task-result-spans-requeues.md).
    """
    entry = requeue_entry_sql(source, actor)
    return (
        f"{_carried(source)}, 'ready', {run_at}, 0, {max_attempts}, {source}.errors, '', "
        f"{source}.requeue_count + 1, {source}.requeue_history || jsonb_build_array({entry}), "
        "statement_timestamp()"
    )


def requeue_entry_sql(source: str, actor: str) -> str:
    """A history.RequeueEntry built from the dead-letter row ``source``, stamped by the database."""
    return stamped(
        f"jsonb_build_object('dead_letter_id', {source}.id, 'job_id', {source}.job_id, "
        f"'reason', {source}.reason, 'attempts', {source}.attempts, "
        f"'last_error', left({source}.last_error, {REQUEUE_ERROR_CHARS}), "
        f"'dead_at', {source}.dead_at, 'by', {actor}, "
        f"'enqueued_at', {source}.enqueued_at, 'first_attempt_at', {source}.first_attempt_at)"
    )


def event_entry_sql(source: str, *, message: str, kind: str, ended: str, worker: str) -> str:
    """A history.AttemptEntry built in SQL for an attempt that ended without an exception.

    The SQL twin of history.event_entry(), for statements that end many
    attempts at once; ``message`` and ``worker`` are SQL expressions.
    """
    return stamped(
        f"jsonb_build_object('attempt', {source}.attempts, 'error_class', '', 'traceback', '', "
        f"'message', {message}, 'kind', '{kind}', 'ended', '{ended}', 'worker', {worker})"
    )


def lease_expired_entry_sql(source: str) -> str:
    """The entry of an attempt whose worker stopped heartbeating."""
    message = f"'lease expired: worker ' || {source}.lease_owner || ' stopped heartbeating'"
    return event_entry_sql(
        source, message=message, kind="retryable", ended="lease_expired", worker=f"{source}.lease_owner"
    )


def trimmed(array_sql: str, limit_sql: str) -> str:
    """The last ``limit`` elements of a jsonb array, so the history stays bounded."""
    return (
        f"(SELECT COALESCE(jsonb_agg(e ORDER BY i), '[]'::jsonb) "
        f"FROM jsonb_array_elements({array_sql}) WITH ORDINALITY AS t(e, i) "
        f"WHERE i > jsonb_array_length({array_sql}) - {limit_sql})"
    )


def stamped(entry_sql: str) -> str:
    """A history entry with the database's time of the event added."""
    return f"({entry_sql} || jsonb_build_object('at', statement_timestamp()))"


# -- locking reads: they change no row, and lock the rows the statements of statements.py write next
def lock_attempt_sql() -> str:
    """Lock a running attempt (ONE_FENCED), to read ``elapsed``."""
    return f"""
        SELECT {ELAPSED_SQL} AS elapsed FROM {JOB} AS j, {ONE_FENCED}
        WHERE j.id = d.id AND {FENCE}
        FOR UPDATE OF j
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


def as_json(value: Any) -> Any:
    """Django leaves jsonb undecoded on raw cursors; decode it if so."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def loggable(exc: BaseException) -> dict[str, Any]:
    """What of a database error may go to the logs: its class and SQLSTATE.

    Never its message: PostgreSQL's may quote a row ("Failing row contains
    ..."), i.e. job arguments, which never go to the logs.
    """
    sqlstate = getattr(getattr(exc.__cause__, "diag", None), "sqlstate", None)
    return {"error_class": type(exc).__name__, "sqlstate": sqlstate}


def named_rows(cursor: Any) -> list[dict[str, Any]]:
    """The rows a statement returned, each a dict keyed by its RETURNING column names."""
    names = [column.name for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def violates(exc: BaseException, constraint: str) -> bool:
    """Whether the database refused ``exc``'s statement for ``constraint`` (read by name, not message)."""
    return getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None) == constraint


def statement_guard() -> AbstractContextManager[Any]:
    """A savepoint only inside a caller's transaction (an enqueue's, testing.run_jobs), where a
    refused statement must not abort it; in autocommit a statement that fails changes nothing."""
    return transaction.atomic() if connection.in_atomic_block else nullcontext()
