"""The statements of held work: the claim's filter, pauses, breakers and snoozes.

A held job is a ready job the claim skips (:func:`not_held`): its queue or
task is paused, or its task's breaker is not closed and the job is not the
breaker's probe. Holding writes nothing on the jobs; releasing adds the time
each job was due but held to its ``held_seconds`` (:data:`HELD_SINCE`), which
the ``retry_for`` clock leaves out (sql.ELAPSED_SQL). Times are the
database's (docs/design.md#rule-5).
"""

from __future__ import annotations

from django_jobretry.jobs.sql import CLEAR_LEASE, DEAD, FENCE, JOB, ONE_ATTEMPT, stamped, trimmed
from django_jobretry.models import Circuit, Pause

PAUSES = Pause._meta.db_table
CIRCUITS = Circuit._meta.db_table


def not_held(job: str) -> str:
    """The claim's filter on the job rows ``job``: ``jobretry_held()`` (migration 0025) is false.

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


# -- pauses ----------------------------------------------------------------------------------
def pause_sql(column: str) -> str:
    """Pause the queue or task ``%(name)s`` (``column``), or change the pause in force.

    A pause keeps the time it started, so a second operator's pause of the
    same target changes who, why and until, not how long the jobs were held;
    one that had expired starts again now. Returns ``created``.
    """
    return f"""
        INSERT INTO {PAUSES} AS p ({column}, paused_by, reason, until, paused_at)
        VALUES (%(name)s, %(actor)s, %(reason)s, %(until)s, statement_timestamp())
        ON CONFLICT ({column}) WHERE {column} IS NOT NULL DO UPDATE
        SET paused_by = excluded.paused_by, reason = excluded.reason, until = excluded.until,
            paused_at = CASE WHEN p.until <= statement_timestamp() THEN statement_timestamp()
                        ELSE p.paused_at END
        RETURNING (xmax = 0) AS created, paused_at, until
    """


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


# -- breakers --------------------------------------------------------------------------------
#: Count one failure of ``%(task)s`` in the window of ``%(window)s`` seconds, in the failure's
#: transaction; the row lock orders concurrent counts. No row back: the breaker is not closed.
COUNT_FAILURE = f"""
    INSERT INTO {CIRCUITS} AS c (task_name, state, failures, window_started_at, updated_at)
    VALUES (%(task)s, 'closed', 1, statement_timestamp(), statement_timestamp())
    ON CONFLICT (task_name) DO UPDATE SET
        failures = CASE WHEN c.window_started_at > statement_timestamp() - make_interval(secs => %(window)s)
                   THEN c.failures + 1 ELSE 1 END,
        window_started_at = CASE
            WHEN c.window_started_at > statement_timestamp() - make_interval(secs => %(window)s)
            THEN c.window_started_at ELSE statement_timestamp() END,
        updated_at = statement_timestamp()
    WHERE c.state = 'closed'
    RETURNING c.failures
"""

#: Open (or reopen, or hold longer) the breaker of ``%(task)s`` for ``%(cooldown)s`` seconds.
#: From closed it is the first opening; otherwise the count goes on and the hold keeps its start.
#: An open breaker's end only moves later. Returns the row as it is now.
OPEN = f"""
    INSERT INTO {CIRCUITS} AS c (task_name, state, failures, opened_at, open_until, opens, cooldown_seconds,
                                 max_cooldown_seconds, release_per_second, reason, updated_at)
    VALUES (%(task)s, 'open', 0, statement_timestamp(),
            statement_timestamp() + make_interval(secs => %(cooldown)s), 1, %(cooldown)s, %(max_cooldown)s,
            %(rate)s, %(reason)s, statement_timestamp())
    ON CONFLICT (task_name) DO UPDATE SET
        state = 'open', failures = 0, window_started_at = NULL, probe_job_id = NULL, probe_attempts = NULL,
        opened_at = CASE WHEN c.state = 'closed' THEN statement_timestamp() ELSE c.opened_at END,
        opens = CASE WHEN c.state = 'closed' THEN 1 ELSE c.opens + 1 END,
        open_until = CASE WHEN c.state = 'open' THEN GREATEST(c.open_until, excluded.open_until)
                     ELSE excluded.open_until END,
        cooldown_seconds = excluded.cooldown_seconds, max_cooldown_seconds = excluded.max_cooldown_seconds,
        release_per_second = excluded.release_per_second, reason = excluded.reason,
        updated_at = statement_timestamp()
    RETURNING c.task_name, c.opens, c.open_until, c.opened_at
"""

#: Breakers whose cooldown is over or whose probe is out, locked (one worker acts on each).
DUE_CIRCUITS = f"""
    SELECT c.task_name, c.state, c.opens, c.cooldown_seconds, c.max_cooldown_seconds, c.release_per_second,
           c.probe_job_id,
           c.probe_attempts, j.status AS probe_status, j.attempts AS probe_now,
           j.run_at > statement_timestamp() AS probe_later,
           EXISTS (SELECT 1 FROM {DEAD} AS dl WHERE dl.job_id = c.probe_job_id
                   AND dl.reason IN ('exhausted', 'deadline', 'lease_expired')) AS probe_died
    FROM {CIRCUITS} AS c LEFT JOIN {JOB} AS j ON j.id = c.probe_job_id
    WHERE (c.state = 'open' AND c.open_until <= statement_timestamp()) OR c.state = 'half_open'
    ORDER BY c.task_name
    FOR UPDATE OF c SKIP LOCKED
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
        SELECT id, attempts, queue_name FROM {JOB}
        WHERE task_name = %(task)s AND status = 'ready' AND run_at <= statement_timestamp()
        ORDER BY probes, max_attempts - attempts DESC, priority DESC, run_at, id LIMIT 1
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
#: that raised ``CircuitOpen``), as holds/status.py counts them held. Each one's held
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
                   secs => %(spacing)s * (row_number() OVER (ORDER BY priority DESC, run_at, id) - 1)::float8
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


# -- snoozes ---------------------------------------------------------------------------------
#: The running attempt (fenced, locked) about to give itself back: the time it snoozed so far, and
#: whether it runs as its breaker's probe (the claim let it through for the attempts it had then).
DEFERRING = f"""
    SELECT j.snoozed_seconds,
           EXISTS (SELECT 1 FROM {CIRCUITS} AS c
                   WHERE c.task_name = j.task_name AND c.state = 'half_open'
                     AND c.probe_job_id = j.id AND c.probe_attempts = j.attempts - 1) AS probe
    FROM {JOB} AS j,
         (SELECT %(id)s::bigint AS id, %(attempt)s::int AS attempts, %(token)s::uuid AS token) AS d
    WHERE j.id = d.id AND {FENCE}
    FOR UPDATE OF j
"""


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
