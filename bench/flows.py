"""What a flow costs the drain: 10,000 jobs alone, as a batch with a callback, and fanned out and in.

    make bench BENCH_FLOWS_ARGS="--steps 10000 --rounds 3"      # embedded PostgreSQL, throwaway
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scratch .venv/bin/python bench/flows.py

Against DATABASE_URL (migrated first; it empties the jobs and flows tables),
one ``runworker --burst --concurrency 10`` process drains (bench/run.py's
drain) ``--steps`` no-op jobs in three setups, interleaved round by round:

* no flow: the jobs bulk-enqueued, as bench/run.py and bench/limits.py do;
* batch + on_success: one flow of ``--steps`` steps side by side and a
  success callback, which has an edge from every step: each step's success
  satisfies one edge and counts down the callback's ``waiting_on`` and the
  flow's ``open_steps`` (jobs/functions.sql, "workflows");
* fan-out/fan-in: one root, ``--steps`` steps after it, one sink after them
  all: the root's success readies every step in one statement; each step's
  success counts down the sink and the flow.

Every flow step's success writes those two rows, the same two for the whole
flow: the hot rows this measures. The table gives each setup's median jobs/s
(its jobs: the steps, plus the callback or the root and the sink) and the
ratio to "no flow"; the issue's aim is 0.5 or more. Then how long the flows
took to enqueue, which the drain does not include.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.run import bulk_enqueue, drain, job_table, noop_job, print_drain_ratios, query, setup_django  # noqa: E402


def empty() -> None:
    """No job, no flow left by the previous measurement (TRUNCATE: no dead rows either)."""
    from django_jobretry.models import DeadLetter, Flow, FlowEdge, FlowStep

    tables = [job_table(), *(m._meta.db_table for m in (DeadLetter, FlowEdge, FlowStep, Flow))]
    query(f"TRUNCATE {', '.join(tables)}")


def plain(steps: int) -> int:
    bulk_enqueue(steps, 1000)
    return steps


def batch(steps: int) -> int:
    from django_jobretry.flows import batch, call

    noop = noop_job()
    batch("bench-batch", [call(noop)] * steps, on_success=call(noop)).enqueue()
    return steps + 1


def fan(steps: int) -> int:
    from django_jobretry.flows import Workflow

    noop = noop_job()
    flow = Workflow("bench-fan")
    root = flow.add(noop, name="root")
    middle = [flow.add(noop, after=[root], name=f"step-{n}") for n in range(steps)]
    flow.add(noop, after=middle, name="sink")
    flow.enqueue()
    return steps + 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0)
    options = parser.parse_args()
    setup_django(poll_seconds=0.1)
    setups: dict[str, Callable[[int], int]] = {
        "no flow": plain,
        "batch + on_success": batch,
        "fan-out/fan-in (1 -> N -> 1)": fan,
    }
    rates: dict[str, list[float]] = {label: [] for label in setups}
    enqueues: dict[str, list[float]] = {label: [] for label in setups}
    for _ in range(options.rounds):
        for label, enqueue in setups.items():
            empty()
            started = time.perf_counter()
            jobs = enqueue(options.steps)
            enqueues[label].append(time.perf_counter() - started)
            query("ANALYZE")
            result = drain(1, 10, jobs, options.timeout)
            rates[label].append(jobs / result.wall)
    empty()
    print_drain_ratios(options.steps, options.rounds, rates, "no flow")
    print("enqueue: " + ", ".join(f"{label} {statistics.median(s):.2f} s" for label, s in enqueues.items()))


if __name__ == "__main__":
    main()
