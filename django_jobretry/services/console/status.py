"""What is happening now, for operators: each queue's backlog, delay and dead letters.

The admin dashboard and `manage.py jobstatus` read it. Both are opened in an
incident, when the jobs table may hold millions of rows, so every figure
comes from an index and costs the same whatever the table's size
(services/console/status_sql.py has the statements, tests/integration/test_status_plans.py
checks their plans):

- counts stop at ``COUNT_LIMIT`` (shown as "10,000+"), each a ``LIMIT``ed
  index-only walk, like the admin's paginator;
- queues are found by skipping through an index that starts with the
  queue name, one probe per queue, never by ``DISTINCT`` over the rows;
- the oldest due job of a queue is the earliest ``run_at`` among the first
  entry of each priority in the claim index, one probe per priority;
- running jobs are few (at most the workers' concurrency): the lease index
  lists them.

Succeeded jobs, most of the table, are counted only for the last hour, in
their own index, never per queue. The workers are in services/console/workers.py.
All ages are measured on the database clock (docs/design.md#rule-5).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction

from django_jobretry.models import DeadReason
from django_jobretry.services.console.status_sql import QUEUES_SQL, TOTALS_SQL

#: Counts stop here: past it, a figure says "more than 10,000", as the admin lists do.
COUNT_LIMIT = 10_000
#: A chart bar stops here (services/console/deaths.py): 31 bars at 10,000 would cost more
#: than the rest of the page.
BAR_LIMIT = 1_000


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
