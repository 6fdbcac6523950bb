"""`manage.py prunejobs` in a thread of its own, with its batches timed, and lock waits watched.

Used by bench/large_tables.py: the prune runs through ``call_command`` (the
real command) on a connection of its own while a worker process drains
jobs; an execute wrapper stamps each batch's ``SELECT ... FOR UPDATE SKIP
LOCKED`` and counts each ``DELETE``'s rows, and :class:`LockWatch` samples
``pg_stat_activity`` for any backend of the database waiting on a lock.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from io import StringIO
from typing import Any

#: Every backend of this database that waits on a heavyweight lock now, but the sampler itself.
LOCK_WAITERS = """
    SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 70)
    FROM pg_stat_activity
    WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()
"""


@dataclass
class Batches:
    """What the execute wrapper saw: each batch's start and each DELETE's row count."""

    starts: list[float] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0
    output: str = ""
    error: BaseException | None = None

    def wrapper(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if "FOR UPDATE SKIP LOCKED" in sql:
            self.starts.append(time.perf_counter())  # a batch begins with the SELECT that locks its rows
        result = execute(sql, params, many, context)
        if sql.lstrip().upper().startswith("DELETE"):
            self.deleted.append(context["cursor"].rowcount)
        return result

    @property
    def seconds(self) -> float:
        return self.ended - self.started

    def durations(self) -> list[float]:
        """Each deleting batch, from its SELECT to the next batch's SELECT (so with its COMMIT)."""
        marks = [*self.starts, self.ended]
        return [after - before for before, after in itertools.pairwise(marks)][: len(self.deleted)]


class Prune(threading.Thread):
    """``manage.py prunejobs --older-than AGE`` on this thread's own connection."""

    def __init__(self, older_than: str) -> None:
        super().__init__(name="prunejobs", daemon=True)
        self.older_than = older_than
        self.batches = Batches()

    def run(self) -> None:
        from django.core.management import call_command
        from django.db import connection

        out = StringIO()
        try:
            with connection.execute_wrapper(self.batches.wrapper):
                self.batches.started = time.perf_counter()
                call_command("prunejobs", "--older-than", self.older_than, stdout=out)
        except BaseException as exc:  # reported by the main thread
            self.batches.error = exc
        finally:
            self.batches.ended = time.perf_counter()
            self.batches.output = out.getvalue().strip()
            connection.close()


@dataclass
class LockWatch:
    """Samples of the backends waiting on a lock: how many samples, how many saw a waiter, and what."""

    samples: int = 0
    waiting: int = 0
    statements: Counter[str] = field(default_factory=Counter)

    def sample(self) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(LOCK_WAITERS)
            rows = [row[0] for row in cursor.fetchall()]
        self.samples += 1
        if rows:
            self.waiting += 1
            self.statements.update(rows)

    def watch(self, busy: Callable[[], bool], every: float = 0.02) -> None:
        """Sample every ``every`` seconds while ``busy()``."""
        while busy():
            self.sample()
            time.sleep(every)

    def describe(self) -> str:
        if not self.waiting:
            return f"none in {self.samples:,} samples"
        seen = "; ".join(f"{n}x `{sql}`" for sql, n in self.statements.most_common(3))
        return f"{self.waiting:,} of {self.samples:,} samples: {seen}"
