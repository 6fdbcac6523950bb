"""What the workers are given: a mix of jobs fed over the run, retry storms and hostile rows.

Every job carries a unique key (its ``unique_key``, kept through death and
requeue) recorded in ``chaos_enqueued`` only once its enqueue committed; the
"no job lost" invariant follows each key to its end. An enqueue that fails
on a fault is retried only after checking the audit for the key, so an
enqueue whose commit succeeded but whose reply was lost is not made twice.
"""

# ruff: noqa: S311 - seeded randomness picks the workload, not secrets

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, InterfaceError, connection

from chaos import jobs
from chaos.schema import JOB_TABLE


def _retrying[T](action: Callable[[], T], *, deadline: float) -> T:
    """Run a database action, reconnecting on errors, until ``deadline`` (monotonic)."""
    while True:
        try:
            return action()
        except (DatabaseError, InterfaceError):
            if time.monotonic() > deadline:
                raise
            with contextlib.suppress(DatabaseError, InterfaceError):
                connection.close()
            time.sleep(0.5)


def _known(key: str) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT row_id FROM chaos_audit WHERE source = 'job' AND unique_key = %s LIMIT 1", [key]
        )
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def _record(key: str, kind: str, job_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO chaos_enqueued (key, kind, job_id) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
            [key, kind, job_id],
        )


def enqueue_one(key: str, kind: str, definition: Any, *args: Any, deadline: float) -> None:
    """Enqueue exactly once, whatever the database does meanwhile."""

    def attempt() -> None:
        existing = _known(key)
        job_id = existing if existing is not None else definition.using(unique_key=key).enqueue(*args).pk
        _record(key, kind, job_id)

    _retrying(attempt, deadline=deadline)


def pick(rng: random.Random, key: str) -> tuple[str, Any, tuple[Any, ...]]:
    """One job of the ordinary mix: (kind, definition, arguments)."""
    roll = rng.random()
    if roll < 0.65:
        return "quick", jobs.quick, (key,)
    if roll < 0.80:
        failures = rng.randint(1, 2)
        return f"flaky{failures}", jobs.flaky, (key, failures)
    if roll < 0.85:
        return "fatal", jobs.fatal, (key,)
    return "sleepy", jobs.sleepy, (key, round(rng.uniform(0.2, 2.5), 2))


class Feeder(threading.Thread):
    """Enqueues ``count`` jobs evenly over ``seconds``; ``gate`` pauses it (database restart)."""

    def __init__(self, count: int, seconds: float, seed: int, gate: threading.Lock, deadline: float) -> None:
        super().__init__(name="chaos-feeder", daemon=True)
        self.count, self.seconds, self.gate, self.deadline = count, seconds, gate, deadline
        self.rng = random.Random(seed)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            start = time.monotonic()
            for i in range(self.count):
                time.sleep(max(0.0, start + i * self.seconds / self.count - time.monotonic()))
                key = f"job-{i}"
                kind, definition, args = pick(self.rng, key)
                with self.gate:
                    enqueue_one(key, kind, definition, *args, deadline=self.deadline)
        except BaseException as exc:  # reported by the harness, which then fails the run
            self.error = exc
        finally:
            connection.close()


def retry_storm(name: str, count: int, deadline: float) -> None:
    """``count`` jobs at once that all fail twice: waves of retries hit the workers together."""
    for i in range(count):
        enqueue_one(f"{name}-{i}", "storm", jobs.storm, f"{name}-{i}", 2, deadline=deadline)


def poison(name: str, deadline: float) -> None:
    enqueue_one(name, "poison", jobs.poison, name, deadline=deadline)


#: Rows enqueue() would refuse, written by raw SQL: (label, column values).
#: Every one must still end as a succeeded job or a dead letter, and stop no worker.
#: Rows the table's CHECK constraints refuse (a time Python cannot hold, arguments
#: or histories of the wrong JSON type) are not here: tests/integration/jobs/test_readable_rows.py.
HOSTILE: list[tuple[str, dict[str, Any]]] = [
    ("unknown task", {"task_name": "chaos.no_such_task", "max_attempts": 2}),
    ("task name of odd characters", {"task_name": "chaos.\u00e9\u2603 " + "x" * 180, "max_attempts": 1}),
    ("args nested 3000 deep", {"args": "[" * 3000 + "]" * 3000, "max_attempts": 1}),
    ("too many args", {"args": "[1, 2, 3, 4]", "max_attempts": 2}),
    ("1 MB argument", {"args": '["' + "y" * 1_000_000 + '"]'}),
    ("unknown policy", {"policy_name": "no-such-policy", "max_attempts": 1}),
    ("extreme priority", {"priority": 100}),
    ("lowest priority", {"priority": -100}),
    ("run_at in 1970", {"run_at": "1970-01-01T00:00:00Z"}),
    # Once stopped every claim that picked it (the original job id was cast to bigint).
    ("requeue history with a non-numeric job id", {"requeue_history": '[{"job_id": "seven"}]'}),
]


def insert_hostile(deadline: float, rows: list[tuple[str, dict[str, Any]]] = HOSTILE) -> None:
    """Insert hostile ``rows``, by raw SQL, with the chaos.quick defaults for what they leave out."""
    for i, (label, values) in enumerate(rows):
        key = f"hostile-{i}"
        row: dict[str, Any] = {
            "task_name": "chaos.quick",
            "queue_name": "default",
            "policy_name": "chaos",
            "status": "ready",
            "args": f'["{key}"]',
            "kwargs": "{}",
            "priority": 0,
            "attempts": 0,
            "max_attempts": 3,
            "lease_owner": "",
            "errors": "[]",
            "requeue_count": 0,
            "requeue_history": "[]",
            **values,
            "unique_key": key,
        }
        columns = ", ".join(row)
        placeholders = ", ".join(f"%({name})s" for name in row)
        sql = f"INSERT INTO {JOB_TABLE} ({columns}) VALUES ({placeholders}) RETURNING id"  # noqa: S608

        def insert(sql: str = sql, row: dict[str, Any] = row, key: str = key, label: str = label) -> None:
            existing = _known(key)
            if existing is None:
                with connection.cursor() as cursor:
                    cursor.execute(sql, row)
                    existing = int(cursor.fetchone()[0])
            _record(key, f"hostile: {label}", existing)

        _retrying(insert, deadline=deadline)
