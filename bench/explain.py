"""EXPLAIN (ANALYZE, BUFFERS) of the worker's claim query on a large job table.

    DATABASE_URL=postgres://... .venv/bin/python bench/explain.py [--queue NAME]

In one transaction that is rolled back at the end (nothing is left behind):
fills the job table with 1,000,000 succeeded jobs and 10,000 ready ones
(INSERT ... SELECT generate_series, not the ORM), runs ANALYZE, then runs the
exact statement `claim.claim()` sends (captured from a real call: limit
10, no queue filter unless --queue) under EXPLAIN (ANALYZE, BUFFERS). Exits 1
if the plan does not use the partial index jobretry_job_claim or reads the
job table sequentially.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLAIM_INDEX = "jobretry_job_claim"


class _Captured(Exception):
    """Raised by the execute wrapper to stop the claim before it reaches the database."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--succeeded", type=int, default=1_000_000, help="finished rows (default %(default)s)"
    )
    parser.add_argument("--ready", type=int, default=10_000, help="ready rows (default %(default)s)")
    parser.add_argument("--limit", type=int, default=10, help="claim batch size (default %(default)s)")
    parser.add_argument(
        "--queue",
        action="append",
        dest="queues",
        help="claim only from this queue, as runworker --queue (repeatable; default: all queues)",
    )
    return parser.parse_args(argv)


def setup_django() -> None:
    if not os.environ.get("DATABASE_URL"):
        sys.exit("bench/explain.py: DATABASE_URL is not set; run `make bench` or set it")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def claim_statement(limit: int, queues: list[str] | None) -> tuple[str, Any]:
    """The SQL and parameters `claim.claim()` executes, captured instead of run."""
    from django.db import connection

    from django_jobretry.jobs import claim

    captured: list[tuple[str, Any]] = []

    def capture(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        captured.append((sql, params))
        raise _Captured

    with connection.execute_wrapper(capture), contextlib.suppress(_Captured):
        claim.claim("bench-explain", limit, 60.0, queues)
    if len(captured) != 1:
        sys.exit(f"bench/explain.py: expected one statement from claim(), saw {len(captured)}")
    return captured[0]


#: Every NOT NULL column without a database default, plus the timestamps.
COLUMNS = (
    "task_name, queue_name, policy_name, status, args, kwargs, priority, run_at, attempts, "
    "max_attempts, lease_owner, errors, requeue_count, requeue_history, enqueued_at, "
    "first_attempt_at, started_at, finished_at"
)

#: Finished history spread over the last 30 days, a quarter of it on another queue.
SUCCEEDED_ROWS = """
    SELECT 'tests.jobs_app.jobs.noop', CASE WHEN i %% 4 = 0 THEN 'emails' ELSE 'default' END,
           'default', 'succeeded', '[]', '{}', 0, t, 1, 20, '', '[]', 0, '[]', t, t, t,
           t + interval '5 milliseconds'
    FROM (SELECT i, now() - interval '30 days' + i * (interval '30 days' / %(n)s) AS t
          FROM generate_series(1, %(n)s) AS i) AS s
"""

#: Ready jobs, all due: a quarter on another queue, a tenth at priority 10.
READY_ROWS = """
    SELECT 'tests.jobs_app.jobs.noop', CASE WHEN i %% 4 = 0 THEN 'emails' ELSE 'default' END,
           'default', 'ready', '[]', '{}', CASE WHEN i %% 10 = 0 THEN 10 ELSE 0 END,
           now() - i * interval '10 milliseconds', 0, 20, '', '[]', 0, '[]',
           now() - i * interval '10 milliseconds', NULL, NULL, NULL
    FROM generate_series(1, %(n)s) AS i
"""


def fill(table: str, succeeded: int, ready: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for rows, count in ((SUCCEEDED_ROWS, succeeded), (READY_ROWS, ready)):
            cursor.execute(f"INSERT INTO {table} ({COLUMNS}) {rows}", {"n": count})


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    setup_django()
    from django.db import connection, transaction
    from django.db.models import Count

    from django_jobretry.models import Job

    table = Job._meta.db_table
    sql, params = claim_statement(args.limit, args.queues)
    before = Job.objects.count()
    with transaction.atomic():
        started = time.perf_counter()
        fill(table, args.succeeded, args.ready)
        filled = time.perf_counter() - started
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {table}")
            counts = ", ".join(
                f"{row['status']} {row['n']:,}"
                for row in Job.objects.values("status").annotate(n=Count("id")).order_by("status")
            )
            cursor.execute("SHOW server_version")
            server = cursor.fetchone()
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True)
    after = Job.objects.count()

    print(f"PostgreSQL {server[0] if server else '?'}; filled in {filled:.1f} s; job table: {counts}")
    print(f"(rolled back: {before:,} jobs before, {after:,} after)")
    print(f"\nClaim statement, as claim.claim() sends it; parameters {params}:")
    print(textwrap.dedent(sql).strip("\n"))
    print("\nEXPLAIN (ANALYZE, BUFFERS):\n")
    print(plan)
    print()
    return verdict(plan, table)


def verdict(plan: str, table: str) -> int:
    """0 for an ordered scan of the claim index (it stops after LIMIT rows), else 1."""
    if f"Seq Scan on {table}" in plan:
        print(f"PROBLEM: the claim reads {table} sequentially.")
        return 1
    if f"Index Scan using {CLAIM_INDEX}" in plan:
        print(
            f"OK: an ordered Index Scan of the partial index {CLAIM_INDEX}, stopped by the LIMIT; "
            f"no sequential scan of {table}."
        )
        return 0
    if CLAIM_INDEX in plan:
        print(
            f"NOTE: {CLAIM_INDEX} is read as a bitmap: every matching ready row is fetched and "
            "sorted before the LIMIT, so the claim's cost grows with the number of ready jobs."
        )
        return 1
    print(f"PROBLEM: the claim does not use {CLAIM_INDEX}.")
    return 1


if __name__ == "__main__":
    sys.exit(main())
