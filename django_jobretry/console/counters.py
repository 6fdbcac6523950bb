"""Event counters for the metrics: written without new contention or round trips on the hot paths.

A counter (event, task, queue) is the sum of its rows
(models/status_sample.py). Each writer picks the cheapest way that never
makes one transaction wait for another (docs/design.md#counters):

- **enqueue** runs inside the caller's transaction, where an upsert of one
  shared row would hold that row's lock until the caller commits and so
  serialize every transaction enqueueing the same task. The enqueue
  statement therefore *appends* a row of its own (shard NULL: NULLs never
  collide in the key, so there is no conflict to check or row to lock),
  still in the one statement (jobs/insert.py: one round trip, for
  one job or a bulk enqueue). An append costs less than the upsert into a
  per-session row it replaces.
- **requeue and discard** are rare operator actions: counted the same way, in
  the action's own transaction, so a rolled-back action counts nothing.
- **worker events** (started, succeeded, retried, dead) are added up in the
  worker's memory (:class:`Tally`) and written by the heartbeat thread, one
  statement a beat and one at a clean exit (:func:`flush`): a worker that
  crashes loses at most one heartbeat period of counts.

The flush also folds the appended rows into shard 0: it takes up to
:data:`FOLD_LIMIT` of them ``FOR UPDATE SKIP LOCKED`` (a row an open
transaction has just written is not visible to it, and one another fold
holds is skipped, never waited for), deletes them and adds their sum to
shard 0, in one statement, so every reader's sum is unchanged and the
counters stay monotonic. The table thus holds one row per (event, task,
queue) plus the rows appended since the last beat. Rows with a session's
pid as their shard (written before migration 0014) are folded the same way.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection

from django_jobretry.models import CounterEvent, EventCounter

COUNTERS = EventCounter._meta.db_table
KEY = "event, task_name, queue_name, shard"

#: Rows (event, task, queue, n) given as arrays, appended as counts not folded yet.
_APPEND = f"""
    INSERT INTO {COUNTERS} (event, task_name, queue_name, shard, value)
    SELECT e, t, q, NULL, sum(n)::bigint
    FROM unnest(%(events)s::text[], %(tasks)s::text[], %(queues)s::text[], %(values)s::bigint[])
         AS u(e, t, q, n)
    GROUP BY e, t, q
"""

#: What the fold takes: every row but the totals (shard NULL, or a pid from before migration 0014).
NOT_FOLDED = "shard IS DISTINCT FROM 0"

#: Fold up to %(fold)s unlocked appended rows into shard 0 and add the worker's counts; the
#: totals are upserted in key order, so two folds take their locks in the same order.
_FLUSH = f"""
    WITH folded AS (
        DELETE FROM {COUNTERS} WHERE id IN (
            SELECT id FROM {COUNTERS} WHERE {NOT_FOLDED} ORDER BY id LIMIT %(fold)s FOR UPDATE SKIP LOCKED
        )
        RETURNING event, task_name, queue_name, value
    ), counted AS (
        SELECT event, task_name, queue_name, value FROM folded
        UNION ALL
        SELECT * FROM unnest(%(events)s::text[], %(tasks)s::text[], %(queues)s::text[], %(values)s::bigint[])
    )
    INSERT INTO {COUNTERS} AS c (event, task_name, queue_name, shard, value)
    SELECT event, task_name, queue_name, 0, sum(value)::bigint FROM counted
    GROUP BY event, task_name, queue_name ORDER BY event, task_name, queue_name
    ON CONFLICT ({KEY}) DO UPDATE SET value = c.value + EXCLUDED.value
"""

_TOTALS = f"SELECT event, task_name, queue_name, sum(value)::bigint FROM {COUNTERS} GROUP BY 1, 2, 3"

#: Appended rows folded per beat at most: a beat stays one short statement even after
#: a long time without workers; the rest waits for the next beat. One row is
#: appended per enqueue statement, so at the default heartbeat (20 s) one worker
#: folds up to 5,000 enqueue statements a second, and each further worker as many.
FOLD_LIMIT = 100_000

type Key = tuple[str, str, str]  # (event, task name, queue name)


def _arrays(counts: Counter[Key]) -> dict[str, list[object]]:
    keys = [key for key, n in counts.items() if n]
    return {
        "events": [key[0] for key in keys],
        "tasks": [key[1] for key in keys],
        "queues": [key[2] for key in keys],
        "values": [counts[key] for key in keys],
    }


def count(event: CounterEvent, pairs: Iterable[tuple[str, str]]) -> None:
    """Count ``event`` once per (task, queue) pair, appended: one statement.

    For the caller's transaction (requeue, discard): the rows it appends are
    new, so nothing it holds until commit blocks anyone.
    """
    counts = Counter((event.value, task, queue) for task, queue in pairs)
    if not counts:
        return
    with connection.cursor() as cursor:
        cursor.execute(_APPEND, _arrays(counts))


def flush(counts: Counter[Key], fold: int = FOLD_LIMIT) -> None:
    """Add a worker's ``counts`` to shard 0 and fold up to ``fold`` appended rows into it: one statement."""
    with connection.cursor() as cursor:
        cursor.execute(_FLUSH, {**_arrays(counts), "fold": fold})


def totals() -> dict[Key, int]:
    """Every counter: the sum of its shards, as committed now."""
    with connection.cursor() as cursor:
        cursor.execute(_TOTALS)
        return {(event, task, queue): value for event, task, queue, value in cursor.fetchall()}


@dataclass
class Tally:
    """A worker process's counts not yet written; the runner and main threads add, the heartbeat takes."""

    counts: Counter[Key]
    lock: threading.Lock

    @classmethod
    def empty(cls) -> Tally:
        return cls(Counter(), threading.Lock())

    def add(self, event: CounterEvent, task: str, queue: str) -> None:
        with self.lock:
            self.counts[(event.value, task, queue)] += 1

    def take(self) -> Counter[Key]:
        """Everything counted so far; the tally starts again from zero."""
        with self.lock:
            taken, self.counts = self.counts, Counter()
        return taken

    def put_back(self, counts: Counter[Key]) -> None:
        """Counts a failed flush could not write: they go with the next one."""
        with self.lock:
            self.counts.update(counts)
