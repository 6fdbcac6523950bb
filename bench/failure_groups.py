"""Failure groups on a large dead-letter table: how long the admin's page and the dashboard take.

    make bench BENCH_GROUPS_ARGS="--rows 1000000 --rounds 5"   # embedded PostgreSQL, throwaway
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scratch .venv/bin/python bench/failure_groups.py

Against DATABASE_URL (migrated first; it empties the dead-letter table):
``--rows`` dead letters of bench/deadletters.py's mix (tasks, reasons and
messages of a real outage), then ``VACUUM ANALYZE`` as autovacuum would,
then the groups statement (deadletters/search.py) ``--rounds`` times:
every group of the table (the "Failure groups" page) and the last 24 hours
(the dashboard's panel). Prints the median and the range in milliseconds,
the plan's scan, and whether the target (under 1 s at 10^6) was met; the
script does not fail on it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.deadletters import fill  # noqa: E402
from bench.run import query, setup_django  # noqa: E402

TARGET_MS = 1000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    setup_django(poll_seconds=1.0)
    from django_jobretry.deadletters import search
    from django_jobretry.models import DeadLetter

    table = DeadLetter._meta.db_table
    started = time.perf_counter()
    query(f"TRUNCATE {table}")
    fill(options.rows)
    query(f"VACUUM ANALYZE {table}")
    print(f"failure groups: {options.rows:,} dead letters filled in {time.perf_counter() - started:.0f} s")
    met = True
    for label, since in (("every group", None), ("last 24 hours", timedelta(hours=24))):
        times, found = [], []
        for _ in range(options.rounds):
            begun = time.perf_counter()
            found = search.groups(since=since, limit=100)
            times.append((time.perf_counter() - begun) * 1000)
        sql, params = search.query(since=since, limit=100)
        plan = [row[0] for row in query(f"EXPLAIN {sql}", params)]
        scans = sorted({line.strip().split("  (")[0].removeprefix("-> ") for line in plan if "Scan" in line})
        median = statistics.median(times)
        met = met and median < TARGET_MS
        print(
            f"  {label:<14} {median:7.0f} ms (range {min(times):.0f}-{max(times):.0f}), "
            f"{len(found)} groups of {sum(g.count for g in found):,}; {'; '.join(scans)}"
        )
    verdict = "met" if met else "NOT met"
    print(f"  target: under {TARGET_MS} ms for {options.rows:,} dead letters: {verdict}")


if __name__ == "__main__":
    main()
