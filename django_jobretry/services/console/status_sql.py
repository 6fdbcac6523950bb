"""The statements behind services/console/status.py: index walks that stop early, whatever the table's size.

Each count reads at most ``%(cap)s`` (COUNT_LIMIT + 1) entries of the index
its ORDER BY names; queues are found by skipping through an index that
starts with the queue name. Run them through ``status.index_walks()``, which
keeps the planner from reading a whole backlog as a bitmap first.
tests/integration/test_status_plans.py checks their plans.
"""

from __future__ import annotations

from django_jobretry.services.sql import DEAD, JOB


def _capped(sql_from_where: str, index_order: str, limit: str = "%(cap)s") -> str:
    """A count of the rows of ``FROM ... WHERE ...`` that stops after ``limit`` (COUNT_LIMIT + 1).

    ``index_order`` is the order of the index meant to serve the count: it
    hands the rows over in that order, so the LIMIT stops the walk.
    """
    rows = f"SELECT 1 FROM {sql_from_where} ORDER BY {index_order} LIMIT {limit}"
    return f"(SELECT count(*) FROM ({rows}) AS c)"


def _is_queue(alias: str) -> str:
    """``alias.queue_name = queues.q``, written as a range so the planner keeps queue_name in the order.

    Equal to a value of the outer query, the column would drop out of the
    ORDER BY, and jobretry_job_claim (priority, run_at: no queue) would serve
    the same order, filtering the queue row by row: for a queue with few
    ready jobs behind a backlog in another one, a walk through the backlog.
    """
    return f"{alias}.queue_name >= queues.q AND {alias}.queue_name <= queues.q"


def _age(column: str) -> str:
    """Seconds from ``column`` to now; NULL for a time not yet come."""
    return (
        f"CASE WHEN {column} <= statement_timestamp() "
        f"THEN extract(epoch FROM statement_timestamp() - {column})::float8 END"
    )


def _next_name(table: str, where: str, outer: str) -> str:
    """The next queue name after ``outer``: one probe of an index that starts with queue_name."""
    return (
        f"(SELECT t.queue_name FROM {table} AS t WHERE {where} AND t.queue_name > {outer} "
        "ORDER BY t.queue_name LIMIT 1)"
    )


#: The order of the claim index for one queue (jobretry_job_claim_queue).
CLAIM_QUEUE_ORDER = "j.queue_name, j.priority DESC, j.run_at, j.id"
#: Ready again after a failed attempt: the predicate of jobretry_job_retrying (Job.objects.retrying()).
RETRYING = "j.status = 'ready' AND j.attempts > 0"

#: Seconds since the earliest run_at of a queue's ready jobs, if due. The claim
#: index is ordered by (queue, priority desc, run_at), so the first entry of
#: each priority holds that priority's earliest: one probe per priority
#: present, then the least of them.
_OLDEST_DUE = f"""(
    WITH RECURSIVE p(priority, run_at) AS (
        (SELECT j.priority, j.run_at FROM {JOB} AS j WHERE j.status = 'ready' AND {_is_queue("j")}
         ORDER BY {CLAIM_QUEUE_ORDER} LIMIT 1)
        UNION ALL
        SELECT n.priority, n.run_at FROM p CROSS JOIN LATERAL (
            SELECT j.priority, j.run_at FROM {JOB} AS j
            WHERE j.status = 'ready' AND {_is_queue("j")} AND j.priority < p.priority
            ORDER BY {CLAIM_QUEUE_ORDER} LIMIT 1
        ) AS n
    )
    SELECT {_age("min(p.run_at)")} FROM p
)"""

QUEUES_SQL = f"""
    WITH RECURSIVE ready_queues(q) AS (
        (SELECT queue_name FROM {JOB} WHERE status = 'ready' ORDER BY queue_name LIMIT 1)
        UNION ALL
        SELECT {_next_name(JOB, "t.status = 'ready'", "r.q")} FROM ready_queues AS r WHERE r.q IS NOT NULL
    ), dead_queues(q) AS (
        (SELECT queue_name FROM {DEAD} ORDER BY queue_name LIMIT 1)
        UNION ALL
        SELECT {_next_name(DEAD, "TRUE", "r.q")} FROM dead_queues AS r WHERE r.q IS NOT NULL
    ), running AS (
        SELECT queue_name AS q, count(*) AS n, min(started_at) AS since,
               (array_agg(id ORDER BY started_at, id))[1] AS longest
        FROM {JOB} WHERE status = 'running' GROUP BY queue_name
    ), queues AS (
        SELECT q FROM ready_queues WHERE q IS NOT NULL
        UNION SELECT q FROM dead_queues WHERE q IS NOT NULL
        UNION SELECT q FROM running
    )
    SELECT queues.q,
           (SELECT count(*) FROM (SELECT 1 FROM {JOB} AS j WHERE j.status = 'ready' AND {_is_queue("j")}
                                  ORDER BY {CLAIM_QUEUE_ORDER} LIMIT %(cap)s + retrying.n) AS c),
           retrying.n,
           COALESCE(running.n, 0),
           {_capped(f"{DEAD} AS d WHERE {_is_queue('d')}", "d.queue_name, d.dead_at DESC, d.id DESC")},
           {_OLDEST_DUE},
           running.longest,
           {_age("running.since")}
    FROM queues
    CROSS JOIN LATERAL (
        SELECT {_capped(f"{JOB} AS j WHERE {RETRYING} AND {_is_queue('j')}", "j.queue_name, j.run_at")} AS n
        OFFSET 0  -- counted once: not pulled up into the two places that use it
    ) AS retrying
    LEFT JOIN running USING (q)
    ORDER BY queues.q
"""

_SUCCEEDED_LAST_HOUR = (
    f"{JOB} AS j WHERE j.status = 'succeeded' AND j.finished_at >= statement_timestamp() - interval '1 hour'"
)

_DEAD_OF_REASON = _capped(f"{DEAD} AS d WHERE d.reason = r.reason", "d.reason, d.dead_at DESC, d.id DESC")

TOTALS_SQL = f"""
    SELECT statement_timestamp(),
           ARRAY(SELECT {_DEAD_OF_REASON}
                 FROM unnest(%(reasons)s::text[]) WITH ORDINALITY AS r(reason, i) ORDER BY r.i),
           {_capped(_SUCCEEDED_LAST_HOUR, "j.finished_at")}
"""
