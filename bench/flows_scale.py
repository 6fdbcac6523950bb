"""The workflows acceptance at full size on a real worker: a chain of 1,000, a batch of 10,000.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scratch .venv/bin/python bench/flows_scale.py
    .venv/bin/python bench/flows_scale.py --chain 100 --batch 1000        # the suite's sizes

Against DATABASE_URL (migrated first; it empties the jobs and flows tables,
as bench/flows.py does), one ``runworker --burst --concurrency 10`` drains
each flow of no-op steps (bench/run.py's drain):

* a chain of ``--chain`` steps: each step's claim (``started_at``) must come
  after its parent's success (``finished_at``), both by the database clock;
* a batch of ``--batch`` steps with an ``on_success`` callback: exactly one
  callback job, one attempt, claimed after the last step's success.

It prints how long each took to enqueue and to drain, and exits non-zero,
naming the first violation, if an order or a count is wrong.
tests/integration/flows/test_flows_real_worker.py checks the same at the
suite's size, with each step's own ledger.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.flows import empty  # noqa: E402
from bench.run import drain, noop_job, query, setup_django  # noqa: E402


def check_chain(flow_id: int, steps: int) -> list[str]:
    """What is wrong with the chain's run: a count, an attempt, a step claimed before its parent succeeded."""
    from django_jobretry.models import Job, JobStatus

    rows = list(
        Job.objects.filter(flow_step__flow_id=flow_id)
        .order_by("flow_step_id")
        .values_list("status", "attempts", "started_at", "finished_at")
    )
    problems = [] if len(rows) == steps else [f"{len(rows)} chain jobs, not {steps}"]
    problems += [
        f"step {n}: {s} after {a} attempts"
        for n, (s, a, _, _) in enumerate(rows)
        if (s, a) != (JobStatus.SUCCEEDED, 1)
    ]
    problems += [
        f"step {n + 1} claimed at {child[2]}, before step {n} succeeded at {parent[3]}"
        for n, (parent, child) in enumerate(itertools.pairwise(rows))
        if child[2] is None or parent[3] is None or child[2] < parent[3]
    ]
    return problems


def check_batch(flow_id: int, steps: int) -> list[str]:
    """What is wrong with the batch's run: a step's count or attempts, or the callback's count or time."""
    from django.db.models import Max

    from django_jobretry.models import Job, JobStatus, StepRole

    jobs = Job.objects.filter(flow_step__flow_id=flow_id)
    ran = jobs.filter(flow_step__role=StepRole.STEP, status=JobStatus.SUCCEEDED, attempts=1)
    problems = (
        [] if ran.count() == steps else [f"{ran.count()} of {steps} steps succeeded at their first attempt"]
    )
    callbacks = list(
        jobs.filter(flow_step__role=StepRole.ON_SUCCESS).values_list("status", "attempts", "started_at")
    )
    if [(status, attempts) for status, attempts, _ in callbacks] != [(JobStatus.SUCCEEDED, 1)]:
        return [*problems, f"the on_success callback's jobs: {callbacks}"]
    last = ran.aggregate(last=Max("finished_at"))["last"]
    if callbacks[0][2] is None or last is None or callbacks[0][2] < last:
        problems.append(
            f"the callback was claimed at {callbacks[0][2]}, before the last step succeeded at {last}"
        )
    return problems


def run_chain(steps: int, timeout: float) -> tuple[float, float, list[str]]:
    from django_jobretry.flows import call, chain

    noop = noop_job()
    started = time.perf_counter()
    flow = chain("bench-chain", *(call(noop) for _ in range(steps))).enqueue()
    enqueued = time.perf_counter() - started
    query("ANALYZE")
    return enqueued, drain(1, 10, steps, timeout).wall, check_chain(flow.pk, steps)


def run_batch(steps: int, timeout: float) -> tuple[float, float, list[str]]:
    from django_jobretry.flows import batch, call

    noop = noop_job()
    started = time.perf_counter()
    flow = batch("bench-batch", [call(noop)] * steps, on_success=call(noop)).enqueue()
    enqueued = time.perf_counter() - started
    query("ANALYZE")
    return enqueued, drain(1, 10, steps + 1, timeout).wall, check_batch(flow.pk, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", type=int, default=1_000, help="steps of the chain (default 1,000)")
    parser.add_argument("--batch", type=int, default=10_000, help="steps of the batch (default 10,000)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds each drain may take")
    options = parser.parse_args()
    setup_django(poll_seconds=0.1)
    print("one runworker --burst --concurrency 10 per flow; times in seconds")
    print("| flow | jobs | enqueue | drain | jobs/s | order and counts |")
    print("|---|---:|---:|---:|---:|---|")
    failed = False
    for label, steps, jobs, run in (
        (f"chain of {options.chain:,}", options.chain, options.chain, run_chain),
        (f"batch of {options.batch:,} + on_success", options.batch, options.batch + 1, run_batch),
    ):
        empty()
        enqueued, wall, problems = run(steps, options.timeout)
        verdict = "ok" if not problems else f"WRONG: {problems[0]} ({len(problems)} problems)"
        failed = failed or bool(problems)
        print(f"| {label} | {jobs:,} | {enqueued:.2f} | {wall:.2f} | {jobs / wall:,.0f} | {verdict} |")
    empty()
    if failed:
        sys.exit("bench/flows_scale.py: a flow ran out of order or not exactly once (see the table)")


if __name__ == "__main__":
    main()
