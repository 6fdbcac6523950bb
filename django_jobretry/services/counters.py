"""Event counters for the metrics: written without new contention or round trips on the hot paths.

A counter (event, task, queue) is the sum of its rows over ``shard``
(models/event_counter.py). Each writer picks the cheapest way that never
makes one transaction wait for another (docs/design.md#counters):

- **enqueue** runs inside the caller's transaction, where an upsert of one
  shared row would hold that row's lock until the caller commits and so
  serialize every transaction enqueueing the same task. Each session
  therefore counts into its own row, keyed by ``pg_backend_pid()``, inside
  the enqueue statement itself (services/job_insert.py: still one round
  trip, for one job or a bulk enqueue). A session runs one transaction at a
  time, so no two open transactions ever share a row.
- **requeue and discard** are rare operator actions: counted the same way, in
  the action's own transaction, so a rolled-back action counts nothing.
- **worker events** (started, succeeded, retried, dead) are added up in the
  worker's memory (:class:`Tally`) and written by the heartbeat thread, one
  statement a beat and one at a clean exit (:func:`flush`): a worker that
  crashes loses at most one heartbeat period of counts.

The flush also folds the session rows into shard 0: it takes them
``FOR UPDATE SKIP LOCKED`` (a row an open transaction still holds is left
for a later beat, never waited for), deletes them and adds their sum to
shard 0, in one statement, so every reader's sum is unchanged and the
counters stay monotonic. The table thus holds one row per (event, task,
queue) plus the rows written since the last beat, whatever the number of
sessions PostgreSQL ever had. An enqueue may wait for a fold that has just
taken its session's row: one short autocommit statement, never a caller's
transaction.
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

#: Rows (event, task, queue, n) given as arrays, added to ``%(shard)s``, in key order so
#: two writers that touch the same rows take their locks in the same order.
_ADD = f"""
    INSERT INTO {COUNTERS} AS c (event, task_name, queue_name, shard, value)
    SELECT e, t, q, {{shard}}, sum(n)::bigint
    FROM unnest(%(events)s::text[], %(tasks)s::text[], %(queues)s::text[], %(values)s::bigint[])
         AS u(e, t, q, n)
    GROUP BY e, t, q ORDER BY e, t, q
    ON CONFLICT ({KEY}) DO UPDATE SET value = c.value + EXCLUDED.value
"""
_ADD_TO_SESSION = _ADD.format(shard="pg_backend_pid()")

#: Fold up to %(fold)s unlocked session rows into shard 0 and add the worker's counts.
_FLUSH = f"""
    WITH folded AS (
        DELETE FROM {COUNTERS} WHERE id IN (
            SELECT id FROM {COUNTERS} WHERE shard <> 0 ORDER BY id LIMIT %(fold)s FOR UPDATE SKIP LOCKED
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

#: Session rows folded per beat at most: a beat stays one short statement even after
#: a long time without workers; the rest waits for the next beat.
FOLD_LIMIT = 10_000

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
    """Count ``event`` once per (task, queue) pair into this session's shard: one statement.

    For the caller's transaction (bulk enqueue, requeue, discard): the row it
    writes belongs to this session alone, so the lock held until commit
    blocks no one.
    """
    counts = Counter((event.value, task, queue) for task, queue in pairs)
    if not counts:
        return
    with connection.cursor() as cursor:
        cursor.execute(_ADD_TO_SESSION, _arrays(counts))


def flush(counts: Counter[Key], fold: int = FOLD_LIMIT) -> None:
    """Add a worker's ``counts`` to shard 0 and fold up to ``fold`` session rows into it: one statement."""
    with connection.cursor() as cursor:
        cursor.execute(_FLUSH, {**_arrays(counts), "fold": fold})


def totals() -> dict[Key, int]:
    """Every counter: the sum of its shards, as committed now."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT event, task_name, queue_name, sum(value)::bigint FROM {COUNTERS} GROUP BY 1, 2, 3"
        )
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
