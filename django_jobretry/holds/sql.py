"""The statements of held work: the pause and breaker rows, and the snooze's read of them.

A held job is a ready job the claim skips: its queue or
task is paused, or its task's breaker is not closed and the job is not the
breaker's probe. Holding writes nothing on the jobs; releasing adds the time
each job was due but held to its ``held_seconds``, which the ``retry_for``
clock leaves out (jobs/sql.py: ELAPSED_SQL, held_seconds). Times are the
database's (docs/design.md#rule-5). The claim's filter (jobs/statements.not_held) and
the statements that write job rows (a pause's end, a breaker's park, probe
and close, a snooze) are in jobs/, with the rest of the claim and every other
job write.
"""

from __future__ import annotations

from django_jobretry.jobs.sql import DEAD, FENCE, JOB
from django_jobretry.models import Circuit, Pause

PAUSES = Pause._meta.db_table
CIRCUITS = Circuit._meta.db_table


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
