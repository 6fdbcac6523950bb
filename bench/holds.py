"""What pauses and breakers cost the claim: the drain with none, with holds elsewhere, behind held jobs.

    make bench BENCH_HOLDS_ARGS="--jobs 5000 --rounds 5"           # embedded PostgreSQL, throwaway
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scratch .venv/bin/python bench/holds.py

Against DATABASE_URL (migrated first; it empties the jobs, pauses and
breakers tables), one ``runworker --burst --concurrency 10`` process drains
``--jobs`` no-op jobs (bench/run.py's drain) in three setups, interleaved
round by round so that a noisy neighbour hits all three alike:

* none: no pause, no breaker (every claim still evaluates the two anti-joins);
* elsewhere: 20 paused queues and 10 open breakers, none of them the drained
  job's (the claim's filter has rows to read, none matching);
* behind held: ``--held`` jobs of a paused task ahead of the drained ones in
  claim order (higher priority), so each claim's index scan walks past them;
* behind a breaker: the same jobs held by an open breaker instead, which a
  heartbeat parks at the breaker's end (django_jobretry/holds/breakers.py).

The table gives the median jobs/s of each and its ratio to "none".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.run import bulk_enqueue, drain, empty_jobs, print_drain_ratios, query, setup_django  # noqa: E402

HELD_TASK = "bench.holds.held"


def clear_holds() -> None:
    from django_jobretry.models import Circuit, Pause

    Pause.objects.all().delete()
    Circuit.objects.all().delete()


def elsewhere() -> None:
    from django_jobretry.holds import breakers, pauses

    for n in range(20):
        pauses.pause(queue=f"bench-paused-{n}", actor="bench")
    for n in range(10):
        breakers.hold_task(f"bench.open_{n}", timedelta(hours=1), None, 0)


def behind_held(count: int) -> Callable[[], None]:
    def prepare() -> None:
        from django_jobretry.holds import pauses
        from django_jobretry.models import Job

        Job.objects.bulk_create(
            [Job(task_name=HELD_TASK, priority=10, max_attempts=1) for _ in range(count)], batch_size=1000
        )
        pauses.pause(task=HELD_TASK, actor="bench")

    return prepare


def behind_breaker(count: int) -> Callable[[], None]:
    """``count`` jobs of a task whose breaker is open, parked by one heartbeat's duty."""

    def prepare() -> None:
        from django_jobretry.holds import breakers
        from django_jobretry.models import Job

        Job.objects.bulk_create(
            [Job(task_name=HELD_TASK, priority=10, max_attempts=1) for _ in range(count)], batch_size=1000
        )
        breakers.hold_task(HELD_TASK, timedelta(hours=1), None, 0)
        breakers.beat()

    return prepare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--held", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=300.0)
    options = parser.parse_args()
    setup_django(poll_seconds=0.1)
    setups: dict[str, Callable[[], None]] = {
        "none": lambda: None,
        "elsewhere: 20 paused queues, 10 open breakers": elsewhere,
        f"behind held: {options.held} paused jobs ahead in claim order": behind_held(options.held),
        f"behind a breaker: {options.held} jobs of an open breaker, parked": behind_breaker(options.held),
    }
    rates: dict[str, list[float]] = {label: [] for label in setups}
    for _ in range(options.rounds):
        for label, prepare in setups.items():
            empty_jobs()
            clear_holds()
            prepare()
            bulk_enqueue(options.jobs, 1000)
            query("ANALYZE")
            result = drain(1, 10, options.jobs, options.timeout)
            rates[label].append(options.jobs / result.wall)
    empty_jobs()
    clear_holds()
    print_drain_ratios(options.jobs, options.rounds, rates, "none")


if __name__ == "__main__":
    main()
