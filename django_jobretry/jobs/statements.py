"""Every statement that writes job and dead-letter rows, in state order, each written once.

Read top to bottom, this is the job state machine; the functions around each statement
decide when to run it and never write a row of their own (tests/unit/test_row_writers.py).
Every worker write after the claim carries the fence (docs/design.md#rule-3), read when
the statement is built, so a negative control can break it; times are the database's
(docs/design.md#rule-5). The claim's own fragments (its ready predicate, hold filter and
pick) open its section; those several sections share (the fence, the claim order, the
history and column lists) and the locking reads are in sql.py. This module is longer than
300 lines on purpose: every writer in one place is what lets a reader find them all.

| statement                      | transition                                 | run by                       |
|--------------------------------|--------------------------------------------|------------------------------|
| enqueue_sql                    | new -> ready                               | insert.insert_one/many       |
| INSERT_RUNS                    | new -> ready: a schedule's due slots       | schedules.runs, .rows        |
| INSERT_STEPS                   | new -> ready or waiting: a flow's steps    | flows.build                  |
| replace_call (ORM)             | ready: a new call (on_conflict "replace")  | enqueue.enqueue_unique       |
| claim_sql, LIMITED_CLAIM       | ready -> running, the attempt counted      | claim.claim                  |
| SUCCEED, succeed_and_claim_sql | running -> succeeded (retries, claim ride) | claimed.succeed, claim       |
| jobretry_flow_* (functions.sql)| waiting -> ready, or deleted (cancelled)   | SUCCEED, burials, DISCARD    |
| schedule_retries_sql           | running -> ready after a backoff           | failures.schedule_retries    |
| recovery_retry_sql             | running, lease lost -> ready               | recovery.recover_expired     |
| snooze_sql                     | running -> ready, the attempt given back   | decisions.write              |
| release_sql                    | running, not started -> ready, uncounted   | claimed.release              |
| heartbeat_sql                  | running: lease extended, cancel read       | claimed.heartbeat            |
| PROGRESS                       | running: how far the attempt got           | progress.Reporter            |
| REQUEST_CANCEL                 | running: cancel requested                  | recovery.cancel_jobs         |
| CANCEL_FLOW                    | a flow's waiting, ready -> gone; running   | flows.service                |
|                                | jobs: cancel requested                     |                              |
| end_pauses_sql                 | ready, paused: its held time counted       | holds.pauses (resume)        |
| PARK                           | ready, held: moved to its breaker's end    | holds.breakers               |
| CHOOSE_PROBE                   | ready, held: made its breaker's probe      | holds.breakers               |
| CLOSE                          | ready, held -> released, spaced out        | holds.breakers               |
| bring_forward_sql              | ready, scheduled later -> due now          | retention.bring_forward_next |
| bury_sql                       | running -> dead letter                     | claimed.bury                 |
| recovery_burial_sql            | running, lease lost -> dead letter         | recovery.recover_expired     |
| cancel_burial_sql              | ready, or a refused retry -> dead letter   | recovery.cancel_jobs         |
| import_dead_letters (ORM)      | another system's failure -> dead letter    | deadletters.external         |
| insert_dead_letter (ORM)       | another system's given-up task -> dead     | deadletters.external         |
| revive_sql                     | dead letter -> ready (requeue)             | failures.revive              |
| hand_back (ORM)                | dead letter -> gone, back to its system    | deadletters.external         |
| replace_arguments (ORM)        | dead letter: new arguments (repair)        | deadletters.repair           |
| RECORD_REPAIR                  | ready (just revived): the repair recorded  | deadletters.repair           |
| DISCARD                        | dead letter -> gone                        | deadletters.chunks           |
| prune (ORM)                    | succeeded job or old dead letter -> gone   | retention.prune_*            |
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection

from django_jobretry.holds.sql import CIRCUITS, PAUSES
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
    NO_PROGRESS,
    ONE_ATTEMPT,
    ONE_FENCED,
    RETRY_WINDOW,
    REVIVED_COLUMNS,
    counting_deaths,
    dead_letter_select,
    event_entry_sql,
    held_seconds,
    lease_expired_entry_sql,
    revived_job_select,
    stamped,
    trimmed,
)
from django_jobretry.models import DeadLetter, DeadReason, Job, JobStatus
from django_jobretry.policy import ErrorKind


# -- enqueue: new -> ready -------------------------------------------------------------------------
def enqueue_sql(columns: Sequence[str], rows: str) -> str:
    """New jobs: ``rows`` (``VALUES`` or a ``SELECT``) into ``columns``, quoted. jobs/insert.py
    builds the rest of each statement once per definition, around this INSERT."""
    quote = connection.ops.quote_name
    return f"INSERT INTO {quote(JOB)} ({', '.join(quote(column) for column in columns)}) {rows}"


#: The runs of one look (or one run now), in one statement: ordinary ready jobs, in slot order, so
#: under overlap "skip" and "queue" a schedule's oldest due slot is the one that gets its unique key.
#: A conflict inserts nothing: the schedule's live run holds the key, or the slot has its run already;
#: nor does a run whose task's key a job succeeded with less than its unique_for ago.
INSERT_RUNS = f"""
    INSERT INTO {JOB} (task_name, queue_name, policy_name, priority, max_attempts, args, kwargs,
                       unique_key, unique_for, schedule_name, schedule_slot, retry_until,
                       status, attempts, lease_owner, errors, requeue_count, requeue_history)
    SELECT r.task, r.queue, r.policy, r.priority, r.max_attempts, r.args::jsonb, r.kwargs::jsonb,
           r.key, r.held_for, r.name, r.slot, r.until, 'ready', 0, '', '[]', 0, '[]'
    FROM unnest(%(task)s::text[], %(queue)s::text[], %(policy)s::text[], %(priority)s::int[],
                %(max_attempts)s::int[], %(args)s::text[], %(kwargs)s::text[], %(key)s::text[],
                %(held_for)s::interval[], %(name)s::text[], %(slot)s::timestamptz[], %(until)s::timestamptz[])
        WITH ORDINALITY
        AS r(task, queue, policy, priority, max_attempts, args, kwargs, key, held_for, name, slot, until, n)
    WHERE r.held_for IS NULL OR NOT EXISTS (
        SELECT 1 FROM {JOB} AS h WHERE h.unique_key = r.key AND h.status = 'succeeded'
          AND h.finished_at > statement_timestamp() - r.held_for)
    ORDER BY r.n
    ON CONFLICT DO NOTHING
    RETURNING id, schedule_name, schedule_slot
"""


#: A workflow's steps as jobs, in one statement (flows/build.py): the ones without parents ready,
#: the others "waiting", out of the claim's indexes until their parents succeed (functions.sql).
INSERT_STEPS = f"""
    INSERT INTO {JOB} (task_name, queue_name, policy_name, priority, max_attempts, args, kwargs,
                       limit_lane, unique_key, unique_for, trace_context, flow_step_id,
                       status, attempts, lease_owner, errors, requeue_count, requeue_history)
    SELECT r.task, r.queue, r.policy, r.priority, r.max_attempts, r.args::jsonb, r.kwargs::jsonb,
           r.lane, r.key, r.held_for, %(trace)s::jsonb, r.step, r.status, 0, '', '[]', 0, '[]'
    FROM unnest(%(task)s::text[], %(queue)s::text[], %(policy)s::text[], %(priority)s::int[],
                %(max_attempts)s::int[], %(args)s::text[], %(kwargs)s::text[], %(lane)s::text[],
                %(key)s::text[], %(held_for)s::interval[], %(step)s::bigint[], %(status)s::text[])
        AS r(task, queue, policy, priority, max_attempts, args, kwargs, lane, key, held_for, step, status)
    RETURNING id
"""


def replace_call(
    job_id: int, args: Any, kwargs: Any, *, run_at: Any, run_after: Any, lane: str | None
) -> int:
    """A still-ready job gets a new call (unique.on_conflict "replace"), fenced on "ready"; rows changed."""
    return Job.objects.filter(pk=job_id, status=JobStatus.READY).update(
        args=args, kwargs=kwargs, run_at=run_at, run_after=run_after, limit_lane=lane
    )


# -- claim: ready -> running ----------------------------------------------------------------------
#: The claim's ready predicate on the job rows ``j``: due, with an attempt left. Holds and
#: lanes are filtered beside it (not_held, jobretry_pick_limited).
READY = "j.status = 'ready' AND j.run_at <= statement_timestamp() AND j.attempts < j.max_attempts"


def not_held(job: str) -> str:
    """The claim's filter on the job rows ``job``: ``jobretry_held()`` (functions.sql) is false.

    The function is true while a pause is in force on the job's queue or
    task, or its task's breaker is not closed and the job is not its probe
    at the attempt it was chosen for (a probe is let through its breaker
    once, not through a pause; a failed probe waits for the heartbeat to
    reopen the breaker, holds/breakers.py). A PL/pgSQL
    function, not two anti-joins written into the claim: the
    claim is planned at every call, and the joins cost it more to plan than
    the function costs to run on its few candidate rows (its own queries are
    planned once per session). The claim still walks jobretry_job_claim.
    """
    return f"AND NOT jobretry_held({job}.queue_name, {job}.task_name, {job}.id, {job}.attempts)"


def pick_sql(filters: str = "") -> str:
    """Lock the next due jobs, in claim order, skipping those other workers lock and those held."""
    return f"""
        SELECT j.id FROM {JOB} AS j
        WHERE {READY} {filters} {not_held("j")}
        ORDER BY {CLAIM_ORDER}
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    """


#: The ordinary claim's filter while limits are declared: limited jobs go through LIMITED_CLAIM.
NO_LANE = "AND limit_lane IS NULL "

#: The first job id of the requeue chain: the claim must not fail on a row
#: whose history was edited by hand, so anything but a plain id means "this job".
ORIGINAL_JOB_ID = (
    "CASE WHEN (j.requeue_history -> 0 ->> 'job_id') ~ '^[0-9]{1,18}$' "
    "THEN (j.requeue_history -> 0 ->> 'job_id')::bigint ELSE j.id END"
)

#: Time a limited job was due but unclaimed, added as it is claimed.
WAITED = f" held_seconds = {held_seconds('j.run_at', 'statement_timestamp()')},"


def claim_picked(also: str = "") -> str:
    """Claim the rows of ``picked``: the attempt is counted here (docs/design.md#rule-1).

    Its RETURNING columns are named like ClaimedJob's fields, plus the claim
    order's keys. ``also``: more ``column = value`` pairs for the SET list.
    The last attempt's progress is cleared: the new one reports its own.
    """
    return f"""
    UPDATE {JOB} AS j
    SET status = 'running', attempts = j.attempts + 1, lease_owner = %(owner)s,{also} {NO_PROGRESS},
        lease_token = gen_random_uuid(),
        lease_expires_at = statement_timestamp() + make_interval(secs => %(lease)s),
        started_at = statement_timestamp(),
        first_attempt_at = COALESCE(j.first_attempt_at, statement_timestamp())
    FROM picked WHERE j.id = picked.id
    RETURNING j.id, j.task_name, j.queue_name, j.policy_name, j.args AS raw_args, j.kwargs AS raw_kwargs,
              j.attempts AS attempt, j.max_attempts, j.lease_token AS token,
              {ORIGINAL_JOB_ID} AS original_job_id, j.requeue_count, j.schedule_name, j.snoozes,
              {RETRY_WINDOW}, j.trace_context, j.flow_step_id,
              j.priority, extract(epoch FROM j.run_at)::float8 AS run_at_epoch
    """


CLAIM_PICKED = claim_picked()


def claim_sql(
    *, filter_queues: bool, filter_tasks: bool = False, skip_ids: bool = False, skip_lanes: bool = False
) -> str:
    """The claim. Workers filter by queue, and by task for their event loop; ids are ``run_jobs``'s."""
    filters = (
        (NO_LANE if skip_lanes else "")
        + ("AND queue_name = ANY(%(queues)s) " if filter_queues else "")
        + ("AND task_name = ANY(%(tasks)s) " if filter_tasks else "")
        + ("AND id <> ALL(%(skip)s::bigint[])" if skip_ids else "")
    )
    return f"WITH picked AS ({pick_sql(filters)}) {CLAIM_PICKED}"


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
#: Finished attempts succeeded, fenced; the ids that still held their lease, when, and their flow steps.
SUCCEEDED = f"""
    UPDATE {JOB} AS j SET status = 'succeeded', finished_at = statement_timestamp(),
        return_value = d.result::jsonb, {END_LEASE}
    FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(tokens)s::uuid[], %(results)s::text[])
        AS d(id, attempts, token, result)
    WHERE j.id = d.id AND {FENCE}
    RETURNING j.id, j.finished_at, j.flow_step_id
"""


def flow_steps_ended(function: str, rows: str, *also: str) -> str:
    """A CTE ``flows`` calling ``function`` (functions.sql, workflows) on the flow steps of the CTE ``rows``.

    Only when some row is a flow step: a batch outside flows calls nothing. The
    statement must read ``flows`` (:data:`FLOWS_READ`), or PostgreSQL skips it.
    """
    arguments = ", ".join(f"array_agg({column})" for column in ("flow_step_id", *also))
    return (
        f"flows AS (SELECT {function}({arguments}) AS steps FROM {rows} "
        "WHERE flow_step_id IS NOT NULL HAVING count(*) > 0)"
    )


#: The FROM item that makes a statement run its ``flows`` CTE: one row, whatever the CTE returned.
FLOWS_READ = "(SELECT count(*) FROM flows) AS flows_read"

#: SUCCEEDED, and the flows its steps advance: their children made ready, in the same statement.
SUCCEED = f"""
    WITH done AS ({SUCCEEDED}), {flow_steps_ended("jobretry_flow_succeeded", "done")}
    SELECT done.id, done.finished_at FROM done, {FLOWS_READ}
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
        WITH done AS ({SUCCEEDED}), {flow_steps_ended("jobretry_flow_succeeded", "done")}{retried},
            picked AS ({pick_sql(filters)}), claimed AS ({CLAIM_PICKED})
        SELECT d.ids, statement_timestamp() AS finished_at, c.*
        FROM (SELECT array_agg(id) AS ids FROM ({kept}) AS k) AS d CROSS JOIN {FLOWS_READ}
            LEFT JOIN claimed AS c ON TRUE
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


# -- snooze: running -> ready, the attempt given back ---------------------------------------------
def snooze_sql() -> str:
    """A running attempt (ONE_ATTEMPT), fenced, ready again after ``%(delay)s`` s with its attempt back.

    When ``%(counted)s``, ``snoozes`` and ``snoozed_seconds`` count it against
    the policy's snooze budget (not a probe's CircuitOpen). Not a job an
    operator asked to cancel: no row comes back, and the caller buries it.
    """
    errors = trimmed("(j.errors || jsonb_build_array(" + stamped("d.entry") + "))", "%(history)s")
    return f"""
        UPDATE {JOB} AS j
        SET status = 'ready', attempts = j.attempts - 1,
            snoozes = j.snoozes + CASE WHEN %(counted)s THEN 1 ELSE 0 END,
            snoozed_seconds = j.snoozed_seconds + CASE WHEN %(counted)s THEN %(delay)s ELSE 0 END,
            run_at = statement_timestamp() + make_interval(secs => %(delay)s), {CLEAR_LEASE},
            first_attempt_at = CASE WHEN j.attempts = 1 THEN NULL ELSE j.first_attempt_at END,
            errors = {errors}
        FROM {ONE_ATTEMPT}
        WHERE j.id = d.id AND {FENCE} AND j.cancel_requested_at IS NULL
        RETURNING j.id
    """


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


#: How far a running attempt got (jobs/progress.py), fenced like a heartbeat: a lost lease writes nothing.
#: The time is the database's, so the pages showing it agree with every other time on them.
PROGRESS = f"""
    UPDATE {JOB} AS j SET progress_done = %(done)s, progress_total = %(total)s, progress_note = %(note)s,
        progress_at = statement_timestamp()
    FROM {ONE_FENCED}
    WHERE j.id = d.id AND {FENCE}
"""

#: Cancel a workflow (functions.sql jobretry_flow_cancel): its waiting and ready jobs deleted, its
#: running ones asked to stop like REQUEST_CANCEL's.
CANCEL_FLOW = "SELECT cancelled, stopping FROM jobretry_flow_cancel(%(flow)s, %(actor)s)"

#: Ask the workers of running jobs to stop them; the first request's time is kept.
REQUEST_CANCEL = f"""
    UPDATE {JOB} SET cancel_requested_by = %(actor)s,
        cancel_requested_at = COALESCE(cancel_requested_at, statement_timestamp())
    WHERE id = ANY(%(ids)s) AND status = 'running'
"""


# -- holds: ready jobs kept from the claim, then released ------------------------------------------
def end_pauses_sql(where: str) -> str:
    """Delete the pauses matching ``where`` and count the held time of their jobs, in one statement.

    A pause ends at its resume, or at its ``until`` when that came first.
    Returns one row per pause ended, with the queues of its jobs (to wake
    their workers) and how many jobs it held. Two operators resuming at once:
    the second finds nothing to delete, so the time is counted once.
    """
    end = "LEAST(statement_timestamp(), COALESCE(gone.until, 'infinity'))"
    return f"""
        WITH gone AS (DELETE FROM {PAUSES} WHERE {where} RETURNING *),
        released AS (
            UPDATE {JOB} AS j SET held_seconds = {held_seconds("gone.paused_at", end)}
            FROM gone
            WHERE j.status = 'ready' AND j.run_at < {end}
              AND (j.queue_name = gone.queue_name OR j.task_name = gone.task_name)
            RETURNING gone.id AS pause_id, j.queue_name
        )
        SELECT gone.queue_name, gone.task_name, gone.paused_by, gone.reason, gone.paused_at, gone.until,
               (SELECT count(*) FROM released r WHERE r.pause_id = gone.id) AS held,
               ARRAY(SELECT DISTINCT r.queue_name FROM released r WHERE r.pause_id = gone.id) AS queues
        FROM gone
    """


#: Move the jobs an open breaker holds (due, or due before it closes) to its end, at most
#: ``%(limit)s`` a statement, their held time counted up to then: the claim's index scan then
#: stops before them instead of walking past each one. Returns how many moved.
PARK = f"""
    WITH parked AS (
        SELECT j.id, c.opened_at, c.open_until
        FROM {JOB} AS j JOIN {CIRCUITS} AS c ON c.task_name = j.task_name
        WHERE c.state = 'open' AND c.open_until > statement_timestamp()
          AND j.status = 'ready' AND j.run_at < c.open_until
        LIMIT %(limit)s
    )
    UPDATE {JOB} AS j SET run_at = parked.open_until,
        held_seconds = {held_seconds("parked.opened_at", "parked.open_until")}
    FROM parked WHERE j.id = parked.id
"""

#: The due job of ``%(task)s`` chosen as its breaker's probe the fewest times, then with the most
#: attempts left, then in claim order: made the half-open breaker's probe, its ``probes`` counted.
#: The fewest times first: a probe that answers ``CircuitOpen`` gets its attempt back and its
#: ``run_at`` is the earliest of the held jobs, so by attempts and claim order alone it was chosen at
#: every opening of a long outage. Most attempts left next: a failed probe's retry is not preferred.
CHOOSE_PROBE = f"""
    WITH probe AS (
        SELECT id, attempts, queue_name FROM {JOB} AS j
        WHERE task_name = %(task)s AND status = 'ready' AND run_at <= statement_timestamp()
        ORDER BY probes, max_attempts - attempts DESC, {CLAIM_ORDER} LIMIT 1
    ), turn AS (
        UPDATE {JOB} AS j SET probes = j.probes + 1 FROM probe WHERE j.id = probe.id
    )
    UPDATE {CIRCUITS} AS c SET state = 'half_open', probe_job_id = probe.id, probe_attempts = probe.attempts,
        updated_at = statement_timestamp()
    FROM probe WHERE c.task_name = %(task)s
    RETURNING probe.id, probe.queue_name
"""

#: Close the breaker of ``%(task)s`` and release every job it holds ``%(spacing)s`` seconds apart, in
#: claim order: its ready jobs due before its end (those due now, those parked at its end, the one
#: that raised ``CircuitOpen``), as holds/__init__.py counts them held. Each one's held
#: time is counted up to its release; a job released before the end it was parked at (a close by
#: hand) gives back the part PARK counted ahead. Returns how many were released and their queues.
#: The breaker's times are read before the UPDATE clears them (RETURNING shows the new values); the
#: caller holds its row lock.
CLOSE = f"""
    WITH breaker AS (
        SELECT opened_at, open_until FROM {CIRCUITS} WHERE task_name = %(task)s AND state <> 'closed'
    ), closed AS (
        UPDATE {CIRCUITS} SET state = 'closed', failures = 0, window_started_at = NULL, opened_at = NULL,
            open_until = NULL, opens = 0, probe_job_id = NULL, probe_attempts = NULL,
            updated_at = statement_timestamp()
        WHERE task_name = %(task)s AND state <> 'closed'
        RETURNING task_name
    ), held AS (
        SELECT j.id, statement_timestamp() + make_interval(
                   secs => %(spacing)s * (row_number() OVER (ORDER BY {CLAIM_ORDER}) - 1)::float8
               ) AS released_at
        FROM {JOB} AS j, breaker AS b
        WHERE j.task_name = %(task)s AND j.status = 'ready'
          AND j.run_at <= GREATEST(statement_timestamp(), b.open_until)
    ), released AS (
        UPDATE {JOB} AS j SET run_at = held.released_at,
            held_seconds = GREATEST(0, {held_seconds("b.opened_at", "held.released_at")} - CASE
                WHEN j.first_attempt_at IS NOT NULL AND j.run_at = b.open_until
                     AND j.run_at > held.released_at
                THEN extract(epoch FROM j.run_at - held.released_at)::float8 ELSE 0 END)
        FROM held, breaker AS b, closed WHERE j.id = held.id
        RETURNING j.queue_name
    )
    SELECT count(*) AS released, ARRAY(SELECT DISTINCT queue_name FROM released) AS queues FROM released
"""


def waiting(alias: str, *, queues: bool, tasks: bool) -> str:
    """The condition "ready, scheduled later, may still run, not held" (and in the filters) on ``alias``:
    the jobs bring_forward_sql may make due now."""
    return (
        f"{alias}.status = 'ready' AND {alias}.run_at > statement_timestamp() "
        f"AND {alias}.attempts < {alias}.max_attempts {not_held(alias)}"
        + (f" AND {alias}.queue_name = ANY(%(queues)s)" if queues else "")
        + (f" AND {alias}.task_name = ANY(%(tasks)s)" if tasks else "")
    )


def bring_forward_sql(*, queues: bool, tasks: bool) -> str:
    """The ready jobs with the earliest future ``run_at`` (ties included) made due now, for
    ``testing.run_jobs(include_scheduled=True)``; only ``run_at`` changes. Returns their ids."""
    where = {"queues": queues, "tasks": tasks}
    return f"""
        UPDATE {JOB} AS j SET run_at = statement_timestamp()
        FROM (SELECT min(w.run_at) AS at FROM {JOB} AS w WHERE {waiting("w", **where)}) AS next
        WHERE {waiting("j", **where)} AND j.run_at = next.at
        RETURNING j.id
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
    ``attempt``, ``cancelled_by`` (who asked to cancel the job, "" if nobody)
    and ``flow_step_id`` (so whoever announces the burial knows, without a
    query, whether it may have blocked a flow).
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
            RETURNING job_id, id, requeue_count, attempts, flow_step_id, {DIED}
        ), {counting_deaths("dead")}, {flow_steps_ended("jobretry_flow_died", "dead", "id")}
        SELECT dead.job_id, dead.id AS dead_letter_id, dead.requeue_count, dead.task_name,
               dead.queue_name, dead.attempts AS attempt, gone.cancel_requested_by AS cancelled_by,
               dead.flow_step_id
        FROM dead JOIN gone ON gone.id = dead.job_id CROSS JOIN {FLOWS_READ}
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


# -- another system's dead letters: its failures imported, its given-up tasks buried -------------
def import_dead_letters(using: str, rows: Sequence[DeadLetter]) -> list[DeadLetter]:
    """Failures another system recorded, as dead letters (deadletters/external.py claimed them)."""
    return DeadLetter.objects.using(using).bulk_create(rows)


def insert_dead_letter(dead: DeadLetter, using: str) -> None:
    """The dead letter of a task another system's adapter gave up on."""
    dead.save(using=using, force_insert=True)


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
            RETURNING j.id, (j.requeue_history -> -1 ->> 'dead_letter_id')::bigint AS dead_letter_id,
                      j.flow_step_id
        ), {flow_steps_ended("jobretry_flow_revived", "revived")},
        gone AS (
            DELETE FROM {DEAD} AS d USING revived
            WHERE d.id = ANY(%(ids)s::bigint[]) AND d.id = revived.dead_letter_id
        )
        SELECT dead.id AS dead_letter_id, revived.id AS job_id, dead.unique_key,
               dead.requeue_count + 1 AS requeue_count,
               CASE WHEN revived.id IS NULL AND dead.unique_key IS NOT NULL
                    THEN (SELECT max(h.finished_at) + dead.unique_for {held}) END AS taken_until
        FROM dead LEFT JOIN revived ON revived.dead_letter_id = dead.id CROSS JOIN {FLOWS_READ}
        ORDER BY dead.id
    """


# -- after the dead letter: handed back to its system, repaired, discarded ------------------------
def hand_back(dead_letter_id: int) -> None:
    """A dead letter of another system goes: its task was handed back to that system."""
    DeadLetter.objects.filter(pk=dead_letter_id).delete()


def replace_arguments(dead_letter_id: int, args: Any, kwargs: Any) -> None:
    """A locked dead letter's new arguments, before its requeue (deadletters/repair.py)."""
    DeadLetter.objects.filter(pk=dead_letter_id).update(args=args, kwargs=kwargs)


#: The repair, recorded in the RequeueEntry of the job its dead letter just became.
RECORD_REPAIR = (
    f"UPDATE {JOB} SET requeue_history = jsonb_set(requeue_history, '{{-1,repair}}', %s::jsonb) WHERE id = %s"
)

#: Discard a chunk of locked dead letters (deadletters/chunks.py, and retention's pruning); a flow step's
#: descendants are cancelled as at any discard. Returns how many went.
DISCARD = f"""
    WITH gone AS (DELETE FROM {DEAD} WHERE id = ANY(%s::bigint[]) RETURNING flow_step_id),
    {flow_steps_ended("jobretry_flow_discarded", "gone")}
    SELECT (SELECT count(*) FROM gone) FROM {FLOWS_READ}
"""


# -- retention: succeeded jobs and old dead letters deleted -----------------------------------------
def prune(model: type[Job] | type[DeadLetter], ids: Sequence[int]) -> int:
    """Delete one batch of succeeded jobs or dead letters (retention locked them); how many went.

    Dead letters go as DISCARD deletes them: a flow step's dead letter pruned is a discard of it, or
    its flow would stay blocked by a dead letter no longer there.
    """
    if model is DeadLetter:
        with connection.cursor() as cursor:
            cursor.execute(DISCARD, [list(ids)])
            return int(cursor.fetchone()[0])
    count, _ = model.objects.filter(pk__in=ids).delete()
    return count
