"""The statements on schedule rows, and the one that inserts a slot's run: each written once, named.

Times are the database's (docs/design.md#rule-5): a slot is due when
``statement_timestamp()`` has passed it, whatever a worker's own clock says.
"""

from __future__ import annotations

from django_jobretry.jobs.sql import JOB
from django_jobretry.models import Schedule

SCHEDULE = Schedule._meta.db_table

#: The database's clock, which slots are compared with.
NOW = "SELECT statement_timestamp() AS now"

#: Declare this process's schedules: new ones start at their first slot after now; one whose
#: cadence changed starts over there; an unchanged one keeps its next slot and its counts.
DECLARE = f"""
    INSERT INTO {SCHEDULE} AS s (name, task_name, cadence, next_slot, declared_at,
                                 runs, skipped, missed, refused, paused_by, pause_reason)
    SELECT d.name, d.task_name, d.cadence, d.next_slot, statement_timestamp(), 0, 0, 0, 0, '', ''
    FROM unnest(%(name)s::text[], %(task)s::text[], %(cadence)s::text[], %(next_slot)s::timestamptz[])
        AS d(name, task_name, cadence, next_slot)
    ON CONFLICT (name) DO UPDATE SET
        task_name = EXCLUDED.task_name, declared_at = EXCLUDED.declared_at, cadence = EXCLUDED.cadence,
        next_slot = CASE WHEN s.cadence = EXCLUDED.cadence THEN s.next_slot ELSE EXCLUDED.next_slot END
"""

#: Lock the due schedules of this process, oldest slot first, skipping those another worker holds:
#: whoever holds a row decides its due slots, and moves ``next_slot`` past them before it commits.
LOCK_DUE = f"""
    SELECT name, cadence, next_slot, statement_timestamp() AS now FROM {SCHEDULE}
    WHERE name = ANY(%(names)s) AND paused_at IS NULL AND next_slot <= statement_timestamp()
    ORDER BY next_slot
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
"""

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

#: The most a count column (bigint) holds.
COUNT_MAX = 2**63 - 1


def counted(column: str) -> str:
    """``column`` plus the look's count, stopping at :data:`COUNT_MAX`: a full count never fails a look."""
    return f"s.{column} + LEAST(d.{column}, {COUNT_MAX} - s.{column})"


#: What one look decided for each schedule: where it continues, and what became of its due slots.
ADVANCE = f"""
    UPDATE {SCHEDULE} AS s SET next_slot = d.next_slot, runs = {counted("runs")},
        skipped = {counted("skipped")}, missed = {counted("missed")}, refused = {counted("refused")},
        last_slot = COALESCE(d.last_slot, s.last_slot), last_job_id = COALESCE(d.last_job, s.last_job_id)
    FROM unnest(%(name)s::text[], %(next_slot)s::timestamptz[], %(runs)s::bigint[], %(skipped)s::bigint[],
                %(missed)s::bigint[], %(refused)s::bigint[], %(last_slot)s::timestamptz[],
                %(last_job)s::bigint[])
        AS d(name, next_slot, runs, skipped, missed, refused, last_slot, last_job)
    WHERE s.name = d.name
"""

#: Seconds until the next slot of this process's schedules comes due (negative: due already).
UNTIL_NEXT = f"""
    SELECT extract(epoch FROM min(next_slot) - statement_timestamp())::float8 FROM {SCHEDULE}
    WHERE name = ANY(%(names)s) AND paused_at IS NULL
"""

#: Runs of these schedules succeeded just now: the time a "did not run" alert reads.
SUCCEEDED = f"UPDATE {SCHEDULE} SET last_success_at = statement_timestamp() WHERE name = ANY(%(names)s)"
