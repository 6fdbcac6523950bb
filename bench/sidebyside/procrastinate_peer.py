"""procrastinate's figures: ``python -m bench.sidebyside.procrastinate_peer`` on a scratch database.

Its schema is applied first (``schema_manager.apply_schema()``). Enqueue is
``defer()`` (autocommit, the app's pool) and ``batch_defer()`` (one call for
all N); workers are ``python -m procrastinate --app=... worker --concurrency C``
(default 1, LISTEN/NOTIFY on, polling every 5 s); finished jobs are kept
(``delete_jobs`` "never", the default) and counted by status. Its tasks are
all ``async def``: the async no-op is the drain's ``noop``, and ``--concurrency``
is how many run at once on its event loop.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from procrastinate.types import JSONValue

from bench.sidebyside import procrastinate_app
from bench.sidebyside.workloads import IO_SECONDS, child_args, run

APP = "bench.sidebyside.procrastinate_app.app"


def calls(count: int, **more: JSONValue) -> list[dict[str, JSONValue]]:
    return [{"number": number, **more} for number in range(count)]


class Procrastinate:
    default_concurrency = 1
    default_async_concurrency = 1
    pause = (0.005, 0.025)
    missing = {"requeue": "ours only"}

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self.connection = connection
        self.env = dict(os.environ)

    def reset(self) -> None:
        self.query("TRUNCATE procrastinate_jobs, procrastinate_events, procrastinate_periodic_defers")

    def enqueue_one(self, number: int) -> None:
        procrastinate_app.noop.defer(number=number)

    def bulk_enqueue(self, count: int) -> None:
        procrastinate_app.noop.batch_defer(*calls(count))

    def enqueue_many(self, func: str, count: int) -> float:
        if func == "sleeps":
            procrastinate_app.sleeps.batch_defer(*calls(count, seconds=IO_SECONDS))
        else:
            task = procrastinate_app.fail_twice if func == "fail_twice" else procrastinate_app.noop
            task.batch_defer(*calls(count))
        return time.perf_counter()

    def commands(self, processes: int, concurrency: int, workload: str) -> list[list[str]]:
        command = [
            sys.executable,
            "-m",
            "procrastinate",
            f"--app={APP}",
            "worker",
            f"--concurrency={concurrency}",
        ]
        return [command] * processes

    def done(self) -> int:
        return int(self.query("SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'")[0][0])

    def stored(self) -> int:
        return int(self.query("SELECT count(*) FROM procrastinate_jobs")[0][0])

    def runs_per_job(self) -> float:
        rows = self.query(
            "SELECT avg(attempts) FROM procrastinate_jobs WHERE status = 'succeeded' "
            "AND task_name = 'fail_twice'"
        )
        return float(rows[0][0] or 0)

    def stamp(self, number: int) -> None:
        procrastinate_app.stamp.defer(number=number)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall()) if cursor.description else []


def main(argv: Sequence[str] | None = None) -> int:
    args = child_args(argv)
    with (
        psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as connection,
        procrastinate_app.app.open(),
    ):
        exists = connection.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
        if not exists or exists[0] is None:
            procrastinate_app.app.schema_manager.apply_schema()
        return run(Procrastinate(connection), args, lambda figures, checks: None)


if __name__ == "__main__":
    sys.exit(main())
