"""What limits cost the drain: none declared, declared but not used, a global limit, 1,000 keys.

    make bench BENCH_LIMITS_ARGS="--jobs 5000 --rounds 3"          # embedded PostgreSQL, throwaway
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scratch .venv/bin/python bench/limits.py

Against DATABASE_URL (migrated first; it empties the jobs table), one
``runworker --burst --concurrency 10`` process drains ``--jobs`` no-op jobs
(bench/run.py's drain) in four setups, interleaved round by round:

* none declared: the worker declares no limit, so it runs today's claim;
* declared, unused: limits are declared (tests/jobs_app/limited_jobs.py) but
  the jobs drained have none: the ordinary claim skips lanes and a second,
  empty, limited claim runs after it;
* global limit: every job is under ``concurrency=10``, which the worker's
  10 runners never exceed: the limited claim does all the work;
* 1,000 keys: every job is under a per-key limit of 1, spread over 1,000 keys.

The table gives the median jobs/s of each and its ratio to "none declared".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.run import bulk_enqueue, drain, empty_jobs, print_drain_ratios, query, setup_django  # noqa: E402


def plain(count: int) -> None:
    bulk_enqueue(count, 1000)


def global_limit(count: int) -> None:
    from tests.jobs_app.limited_jobs import limited_noop

    for start in range(0, count, 1000):
        limited_noop.bulk_enqueue([((), {})] * min(1000, count - start))


def keys(count: int) -> None:
    from tests.jobs_app.limited_jobs import keyed_noop

    for start in range(0, count, 1000):
        keyed_noop.bulk_enqueue([((n % 1000,), {}) for n in range(start, min(start + 1000, count))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0)
    options = parser.parse_args()
    setup_django(poll_seconds=0.1)
    setups: dict[str, tuple[str, Callable[[int], None]]] = {
        "none declared": ("0", plain),
        "declared, unused": ("1", plain),
        "global limit (concurrency=10)": ("1", global_limit),
        "1,000 keys (concurrency=1 per key)": ("1", keys),
    }
    rates: dict[str, list[float]] = {label: [] for label in setups}
    for _ in range(options.rounds):
        for label, (declared, enqueue) in setups.items():
            empty_jobs()
            enqueue(options.jobs)
            query("ANALYZE")
            os.environ["JOBRETRY_TEST_LIMITS"] = declared  # read by the worker processes drain() starts
            result = drain(1, 10, options.jobs, options.timeout)
            rates[label].append(options.jobs / result.wall)
    empty_jobs()
    print_drain_ratios(options.jobs, options.rounds, rates, "none declared")


if __name__ == "__main__":
    main()
