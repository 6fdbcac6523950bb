"""The raw psycopg floor: ``python -m bench.sidebyside.floor``, a bare job table, no framework.

One autocommit connection in one process, nothing but the statements a job
queue cannot do without, against a table with a partial index on ready jobs:

* ``enqueue``: one INSERT per commit; ``bulk``: ``executemany`` of N INSERTs
  in one transaction (psycopg pipelines them);
* ``drain-1-1``: per job, a claim (``UPDATE ... WHERE id = (SELECT ... FOR
  UPDATE SKIP LOCKED LIMIT 1) RETURNING``) and an ack, each its own commit;
  ``drain-1-d``: the same with batches of 100 (claim 100, ack 100);
* ``fail-twice``: per job, a claim; the first two runs write the job back with
  ``run_at = now() + 1 ms``, the third acks it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from bench.sidebyside.harness import report
from bench.sidebyside.workloads import COROUTINES, child_args, progress

TABLE = "jobretry_sbs_floor"
SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (id bigserial PRIMARY KEY, status text NOT NULL DEFAULT 'ready', "
    "args jsonb NOT NULL, run_at timestamptz NOT NULL DEFAULT now(), attempts integer NOT NULL DEFAULT 0)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_ready ON {TABLE} (run_at, id) WHERE status = 'ready'",
)
INSERT = f"INSERT INTO {TABLE} (args) VALUES (%s)"  # noqa: S608
CLAIM = (
    f"UPDATE {TABLE} SET status = 'running', attempts = attempts + 1 WHERE id IN ("  # noqa: S608
    f"SELECT id FROM {TABLE} WHERE status = 'ready' AND run_at <= now() "
    "ORDER BY run_at, id LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING id, attempts"
)
ACK = f"UPDATE {TABLE} SET status = 'succeeded' WHERE id = ANY(%s)"  # noqa: S608
RETRY = f"UPDATE {TABLE} SET status = 'ready', run_at = now() + interval '1 millisecond' WHERE id = %s"  # noqa: S608


def reset(connection: psycopg.Connection[Any], ready: int = 0) -> None:
    connection.execute(f"TRUNCATE {TABLE}")
    if ready:
        with connection.transaction(), connection.cursor() as cursor:
            cursor.executemany(INSERT, [(Jsonb([number]),) for number in range(ready)])


def drain(
    connection: psycopg.Connection[Any], jobs: int, batch: int, fail_runs: int = 0
) -> tuple[float, str]:
    """Seconds to run ``jobs`` ready jobs, and what became of them."""
    reset(connection, jobs)
    done = 0
    started = time.perf_counter()
    while done < jobs:
        claimed = connection.execute(CLAIM, [batch]).fetchall()
        finished = [job_id for job_id, attempts in claimed if attempts > fail_runs]
        for job_id, attempts in claimed:
            if attempts <= fail_runs:
                connection.execute(RETRY, [job_id])
        if finished:
            connection.execute(ACK, [finished])
        done += len(finished)
    seconds = time.perf_counter() - started
    succeeded = connection.execute(f"SELECT count(*), avg(attempts) FROM {TABLE} WHERE status = 'succeeded'")  # noqa: S608
    count, runs = succeeded.fetchone() or (0, 0)
    if count != jobs:
        raise SystemExit(f"floor: {count} of {jobs} succeeded")
    return seconds, f"{count:,} succeeded, {runs:.2f} runs per job, batches of {batch}"


def main(argv: Sequence[str] | None = None) -> int:
    args = child_args(argv)
    figures: dict[str, float] = {}
    checks: dict[str, str] = {}
    n = args.jobs
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as connection:
        for statement in SCHEMA:
            connection.execute(statement)

        def count() -> str:
            return f"{connection.execute(f'SELECT count(*) FROM {TABLE}').fetchone()[0]:,} stored"  # type: ignore[index]  # noqa: S608

        if "enqueue" in args.workloads:
            reset(connection)
            started = time.perf_counter()
            for number in range(n):
                connection.execute(INSERT, [Jsonb([number])])
            figures["enqueue"], checks["enqueue"] = n / (time.perf_counter() - started), count()
        if "bulk" in args.workloads:
            reset(connection)
            started = time.perf_counter()
            reset(connection, n)
            figures["bulk"], checks["bulk"] = n / (time.perf_counter() - started), count()
        if "drain" in args.workloads:
            for row, batch in (("drain-1-1", 1), ("drain-1-d", 100)):
                seconds, checks[row] = drain(connection, n, batch)
                figures[row] = n / seconds
        if "fail-twice" in args.workloads:
            seconds, checks["fail-twice"] = drain(connection, n, 1, fail_runs=2)
            figures["fail-twice"] = n / seconds
        connection.execute(f"TRUNCATE {TABLE}")
    for row, figure in figures.items():
        progress(f"floor {row}: {figure:,.0f}/s")
    coroutines = set(COROUTINES) & set(args.workloads)
    report(figures, checks, dict.fromkeys(coroutines, "no worker, nothing awaits"), {})
    return 0


if __name__ == "__main__":
    sys.exit(main())
