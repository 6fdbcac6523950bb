"""What operators read and workers report; this module: what is happening now, queue by queue.

The console is layer 3, beside the services: the read models of the admin,
``jobstatus`` and the metrics, and the rows the heartbeat's duties write
(worker/heartbeat.py). None of it changes a job's state; the state
machine's writers may add a count or a death row in the statement that does.
Here: each queue's backlog, delay and dead letters, and what every figure
of the console is counted with (:class:`Count`, :func:`counted`,
:func:`index_walks`). Beside it: the workers table (workers.py), the event
counters (counters.py), and the deaths and samples over time (trends.py).

The admin dashboard and `manage.py jobstatus` read it. Both are opened in an
incident, when the jobs table may hold millions of rows, so every figure
comes from an index and costs the same whatever the table's size
(the statements below, run through :func:`index_walks` so the planner never
reads a whole backlog as a bitmap first;
tests/integration/console/test_status_plans.py checks their plans):

- counts stop at ``COUNT_LIMIT`` (shown as "10,000+"), each a ``LIMIT``ed
  index-only walk, like the admin's paginator;
- queues are found by skipping through an index that starts with the
  queue name, one probe per queue, never by ``DISTINCT`` over the rows;
- the oldest due job of a queue is the earliest ``run_at`` among the first
  entry of each priority in the claim index, one probe per priority;
- running jobs are few (at most the workers' concurrency): the lease index
  lists them.

Succeeded jobs, most of the table, are counted only for the last hour, in
their own index, never per queue. All ages are measured on the database
clock (docs/design.md#rule-5).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction

from django_jobretry.jobs.sql import CLAIM_ORDER, DEAD, JOB
from django_jobretry.models import DeadReason

#: Counts stop here: past it, a figure says "more than 10,000", as the admin lists do.
COUNT_LIMIT = 10_000
#: A chart bar stops here (console/trends.py): 31 bars at 10,000 would cost more
#: than the rest of the page.
BAR_LIMIT = 1_000


# --- the statements: index walks that stop early, whatever the table's size ---------------------


def counted(sql_from_where: str, index_order: str, limit: str = "%(cap)s") -> str:
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


#: The order of the claim index for one queue (jobretry_job_claim_queue): the claim order within a queue.
CLAIM_QUEUE_ORDER = f"j.queue_name, {CLAIM_ORDER}"
#: Ready again after a failed attempt: the predicate of jobretry_job_retrying (Job.objects.retrying()).
RETRYING = "j.status = 'ready' AND j.attempts > 0"
#: The order of jobretry_job_retrying: every count of the retrying jobs walks it.
RETRYING_ORDER = "j.queue_name, j.run_at"

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
           {counted(f"{DEAD} AS d WHERE {_is_queue('d')}", "d.queue_name, d.dead_at DESC, d.id DESC")},
           {_OLDEST_DUE},
           running.longest,
           {_age("running.since")}
    FROM queues
    CROSS JOIN LATERAL (
        SELECT {counted(f"{JOB} AS j WHERE {RETRYING} AND {_is_queue('j')}", RETRYING_ORDER)} AS n
        OFFSET 0  -- counted once: not pulled up into the two places that use it
    ) AS retrying
    LEFT JOIN running USING (q)
    ORDER BY queues.q
"""

_SUCCEEDED_LAST_HOUR = (
    f"{JOB} AS j WHERE j.status = 'succeeded' AND j.finished_at >= statement_timestamp() - interval '1 hour'"
)

_DEAD_OF_REASON = counted(f"{DEAD} AS d WHERE d.reason = r.reason", "d.reason, d.dead_at DESC, d.id DESC")

TOTALS_SQL = f"""
    SELECT statement_timestamp(),
           ARRAY(SELECT {_DEAD_OF_REASON}
                 FROM unnest(%(reasons)s::text[]) WITH ORDINALITY AS r(reason, i) ORDER BY r.i),
           {counted(_SUCCEEDED_LAST_HOUR, "j.finished_at")}
"""


@dataclass(frozen=True)
class Count:
    """A count that stopped after ``COUNT_LIMIT``: ``more`` means more than ``value``.

    ``value`` is None for a count that could not be made cheaply (see
    :func:`_ready`): shown as "?", never as a number that might be wrong.
    """

    value: int | None
    more: bool = False

    @classmethod
    def capped(cls, counted: int, limit: int | None = None) -> Count:
        """From a count of at most ``limit`` (default COUNT_LIMIT) + 1 rows."""
        limit = COUNT_LIMIT if limit is None else limit
        return cls(min(counted, limit), counted > limit)

    def __add__(self, other: Count) -> Count:
        if self.value is None or other.value is None:
            return Count(None)
        return Count(self.value + other.value, self.more or other.more)

    def __str__(self) -> str:
        if self.value is None:
            return "?"
        return f"{self.value:,}+" if self.more else f"{self.value:,}"


@dataclass(frozen=True)
class QueueStatus:
    """One queue now: ready (never attempted), retrying (waiting after a failed attempt), running, dead.

    Ready and retrying never overlap, as in the job list's status filter.
    """

    queue: str
    ready: Count
    retrying: Count
    running: int
    dead: Count
    #: How long the oldest due job has waited past its run_at; None: nothing is due.
    oldest_due: timedelta | None
    #: The job running longest in this queue, and for how long; None: nothing runs.
    longest_running_job: int | None
    longest_running: timedelta | None


@dataclass(frozen=True)
class Totals:
    """The sums of the queue rows, the dead letters per reason, the jobs succeeded in the last hour."""

    now: datetime
    ready: Count
    retrying: Count
    running: int
    dead: Count
    dead_by_reason: dict[str, Count]
    succeeded_last_hour: Count


def _seconds(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


#: Planner settings for this transaction only (``true``: as SET LOCAL).
_INDEX_WALKS_ONLY = (
    "SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)"
)

#: The two settings back to the session's values (a released savepoint keeps SET LOCAL).
_PLANNER_AS_BEFORE = (
    "SELECT set_config(name, reset_val, true) FROM pg_settings "
    "WHERE name IN ('enable_bitmapscan', 'enable_seqscan')"
)


@contextmanager
def index_walks(*, commit: bool = False) -> Iterator[Any]:
    """A cursor whose statements are planned as the index walks they are written to be.

    Each count stops after COUNT_LIMIT + 1 rows of an index, but a
    value from the outer query (a queue name) is unknown to the planner,
    which may then prefer a bitmap scan: it reads every matching row before
    the LIMIT, a whole backlog of a million. With bitmap and sequential
    scans off for these statements only, the counts stop where they should.
    Everything here only reads, so the transaction is rolled back, which also
    undoes the two settings, inside a caller's transaction too. ``commit``
    keeps what the statements wrote (a status sample): the settings then end
    with the transaction, or, inside a caller's, are put back by hand.
    """
    outer = connection.in_atomic_block
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_INDEX_WALKS_ONLY)
        yield cursor
        if not commit:
            transaction.set_rollback(True)
        elif outer:
            cursor.execute(_PLANNER_AS_BEFORE)


def _ready(waiting: int, retrying: int) -> Count:
    """Ready jobs never attempted: the ready rows counted (``waiting``) less the retrying ones.

    No index holds the never-attempted jobs apart (it would cost every enqueue
    a write), so the ready rows are counted up to COUNT_LIMIT + 1 more than
    the retrying ones: the difference is then exact, or "more than
    COUNT_LIMIT". With more than COUNT_LIMIT retrying, that bound is unknown,
    and so is this count.
    """
    if retrying > COUNT_LIMIT:
        return Count(None)
    return Count.capped(waiting - retrying)


def queues() -> list[QueueStatus]:
    """Every queue with ready, running or dead jobs, by name."""
    with index_walks() as cursor:
        cursor.execute(QUEUES_SQL, {"cap": COUNT_LIMIT + 1})
        rows = cursor.fetchall()
    return [
        QueueStatus(
            queue=queue,
            ready=_ready(waiting, retrying),
            retrying=Count.capped(retrying),
            running=running,
            dead=Count.capped(dead),
            oldest_due=_seconds(oldest_due),
            longest_running_job=longest_job,
            longest_running=_seconds(longest_for),
        )
        for queue, waiting, retrying, running, dead, oldest_due, longest_job, longest_for in rows
    ]


def totals(rows: Sequence[QueueStatus]) -> Totals:
    """The sums of ``rows``, the dead letters per reason and the jobs succeeded in the last hour."""
    reasons = list(DeadReason.values)
    with index_walks() as cursor:
        cursor.execute(TOTALS_SQL, {"cap": COUNT_LIMIT + 1, "reasons": reasons})
        now, by_reason, succeeded = cursor.fetchone()
    zero = Count(0)
    return Totals(
        now=now,
        ready=sum((row.ready for row in rows), zero),
        retrying=sum((row.retrying for row in rows), zero),
        running=sum(row.running for row in rows),
        dead=sum((row.dead for row in rows), zero),
        dead_by_reason={reason: Count.capped(n) for reason, n in zip(reasons, by_reason, strict=True)},
        succeeded_last_hour=Count.capped(succeeded),
    )
