"""Bulk requeue and discard of dead letters: rates beside the per-row way and beside the floor.

    make bench BENCH_REQUEUE_ARGS="--sizes 10000 100000 --rounds 3"   # embedded PostgreSQL, throwaway
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scratch .venv/bin/python bench/requeue.py

Against DATABASE_URL (migrated first; it empties the jobs and dead-letter
tables), for each of ``--sizes``, each measurement on a freshly filled
dead-letter table (bench/deadletters.py's mix of queues, tasks and reasons,
then ``VACUUM ANALYZE``):

* per-row: ``deadletters.requeue(id)`` called once per dead letter, on a
  sample of ``--sample`` of them: what one call per row costs, the way bulk
  requeue worked before it was set-based;
* requeue_many: ``deadletters.requeue_many(every id)``, then checked: one
  job per dead letter and no dead letter left (exit 1 otherwise);
* discard_many: ``deadletters.discard_many(every id)``;
* floor: a bare ``INSERT INTO job ... SELECT ... FROM deadletter`` and a
  ``DELETE`` of the same rows in one transaction: what PostgreSQL needs to
  move them at all, with no lock, guard, provenance, counters or log.

Rates are dead letters per second, the median of ``--rounds`` with the range;
requeue_many and discard_many are also given as a ratio to the floor and to
per-row. The last lines say whether the target (>= 20,000/s requeued and
>= 40x per-row) was met at each size; the script does not fail on it.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.deadletters import fill  # noqa: E402
from bench.run import empty_jobs, query, setup_django  # noqa: E402

TARGET_RATE = 20_000
TARGET_RATIO = 40


def dead_table() -> str:
    from django_jobretry.models import DeadLetter

    return DeadLetter._meta.db_table


def refill(size: int) -> list[int]:
    """An empty jobs table and ``size`` fresh dead letters; their ids."""
    empty_jobs()
    query(f"TRUNCATE {dead_table()}")
    fill(size)
    query(f"VACUUM ANALYZE {dead_table()}")
    ids = f"SELECT id FROM {dead_table()} ORDER BY id"  # noqa: S608 - the model's table name
    return [row[0] for row in query(ids)]


def per_row(ids: list[int]) -> float:
    from django_jobretry import deadletters

    started = time.perf_counter()
    for pk in ids:
        deadletters.requeue(pk, actor="bench")
    return len(ids) / (time.perf_counter() - started)


def requeue_many(ids: list[int]) -> float:
    from django_jobretry import deadletters

    started = time.perf_counter()
    deadletters.requeue_many(ids, actor="bench")
    rate = len(ids) / (time.perf_counter() - started)
    counts = f"SELECT (SELECT count(*) FROM {_job()}), (SELECT count(*) FROM {dead_table()})"  # noqa: S608
    jobs, left = query(counts)[0]
    if (jobs, left) != (len(ids), 0):
        sys.exit(f"bench/requeue.py: requeue_many of {len(ids)} left {jobs} jobs and {left} dead letters")
    return rate


def discard_many(ids: list[int]) -> float:
    from django_jobretry import deadletters

    started = time.perf_counter()
    deadletters.discard_many(ids, actor="bench")
    return len(ids) / (time.perf_counter() - started)


def floor(ids: list[int]) -> float:
    from django.db import transaction

    from django_jobretry.jobs.sql import CARRIED_COLUMNS

    carried = ", ".join(CARRIED_COLUMNS)
    columns = f"{carried}, status, run_at, attempts, max_attempts, errors, lease_owner, requeue_count, "
    columns += "requeue_history, enqueued_at"
    started = time.perf_counter()
    with transaction.atomic():
        query(
            f"""
            INSERT INTO {_job()} ({columns})
            SELECT {carried}, 'ready', now(), 0, max_attempts, errors, '', requeue_count + 1,
                   requeue_history, enqueued_at
            FROM {dead_table()} WHERE id = ANY(%s)
            """,  # noqa: S608 - the model's table and column names; the ids are a parameter
            [ids],
        )
        query(f"DELETE FROM {dead_table()} WHERE id = ANY(%s)", [ids])  # noqa: S608 - as above
    return len(ids) / (time.perf_counter() - started)


def _job() -> str:
    from django_jobretry.models import Job

    return Job._meta.db_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--sample", type=int, default=2_000, help="dead letters the per-row way requeues")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    setup_django(poll_seconds=0.1)
    logging.getLogger("django_jobretry").setLevel(logging.WARNING)  # one INFO summary per chunk
    methods: dict[str, Callable[[list[int]], float]] = {
        "per-row requeue()": per_row,
        "requeue_many()": requeue_many,
        "discard_many()": discard_many,
        "floor: INSERT ... SELECT + DELETE": floor,
    }
    print("| dead letters | method | median/s | range | ratio to floor | ratio to per-row |")
    print("|---:|---|---:|---:|---:|---:|")
    verdicts = []
    for size in options.sizes:
        rates: dict[str, list[float]] = {label: [] for label in methods}
        for _ in range(options.rounds):
            for label, method in methods.items():
                ids = refill(size)
                rates[label].append(method(ids[: options.sample] if method is per_row else ids))
        median = {label: statistics.median(values) for label, values in rates.items()}
        base, row = median["floor: INSERT ... SELECT + DELETE"], median["per-row requeue()"]
        for label, values in rates.items():
            ratios = f"{median[label] / base:.2f} | {median[label] / row:.0f}x" if "many" in label else "|"
            spread = f"{min(values):,.0f}-{max(values):,.0f}"
            print(f"| {size:,} | {label} | {median[label]:,.0f} | {spread} | {ratios} |")
        rate = median["requeue_many()"]
        met = rate >= TARGET_RATE and rate >= TARGET_RATIO * row
        verdicts.append(
            f"{size:,}: requeue_many {rate:,.0f}/s, {rate / row:.0f}x per-row, "
            f"{rate / base:.0%} of the floor: target (>= {TARGET_RATE:,}/s and >= {TARGET_RATIO}x) "
            + ("met" if met else "NOT met")
        )
    empty_jobs()
    query(f"TRUNCATE {dead_table()}")
    print()
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
