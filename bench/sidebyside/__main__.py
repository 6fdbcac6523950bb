"""``python -m bench.sidebyside``: every tool, every workload, N rounds, one table (see __init__.py).

Each tool gets a scratch database on DATABASE_URL's server (created here,
dropped at the end whatever happens; the role needs CREATEDB). Each round runs
the tools one after the other, each in a child process of its own, starting
with a different tool each round. A peer that is not installed is reported
as such and the run goes on; a workload (or a whole child) that fails is
reported as "failed" and the run exits 1 after printing what it has.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from importlib.metadata import version
from urllib.parse import urlsplit, urlunsplit

from bench.run import ROOT, environment, load
from bench.sidebyside.table import TOOLS, Outcome, async_lines, checks, render, target_lines
from bench.sidebyside.workloads import COROUTINES, IO_JOBS_PER_SLOT, WORKLOADS

#: Tool key -> (child module, the distribution it needs; None: always there).
CHILDREN = {
    "ours": ("bench.sidebyside.ours", None),
    "q2": ("bench.sidebyside.q2", "django-q2"),
    "procrastinate": ("bench.sidebyside.procrastinate_peer", "procrastinate"),
    "tasks_db": ("bench.sidebyside.tasks_db", "django-tasks-db"),
    "floor": ("bench.sidebyside.floor", None),
}
MODULES = {"django-q2": "django_q", "procrastinate": "procrastinate", "django-tasks-db": "django_tasks_db"}
#: Each tool's default concurrency as the workloads use it, for the notes.
DEFAULTS = (
    "default concurrency: django-jobretry `runworker` 10; django-q2 Q_CLUSTER `workers` = CPU count "
    f"({os.cpu_count()}); procrastinate `worker --concurrency` 1; django-tasks-db `db_worker` 1 (no option); "
    "floor batches of 100"
)
#: How each tool runs ``async def`` jobs, for the notes of the drain-async and io-50ms rows.
ASYNC = (
    "`async def` jobs: django-jobretry on one event loop per process, `--async-concurrency` 100 at once "
    "(default; beside its 10 runner threads); procrastinate's tasks are all `async def` (its native kind, "
    "`--concurrency` 1 by default), so its drain rows are async drains too and its async drain is "
    "the same measurement taken again; django-tasks-db's `db_worker` runs one at a time through "
    "`async_to_sync`; django-q2 calls the function and never awaits what it returns"
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.sidebyside",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    names = [key for key, _ in TOOLS] + list(WORKLOADS)
    add = parser.add_argument
    add("--jobs", type=int, default=5_000, help="N: jobs per workload, every tool (default %(default)s)")
    add("--rounds", type=int, default=3, help="rounds: median and range (default %(default)s)")
    add("--samples", type=int, default=50, help="enqueue-to-start samples per round (default %(default)s)")
    add("--requeue", type=int, default=10_000, help="dead letters requeued (default %(default)s)")
    add("--timeout", type=float, default=300.0, help="seconds a workload may take (default %(default)s)")
    add("--only", nargs="+", choices=names, default=[], metavar="NAME", help=f"tools/workloads: {names}")
    add("--skip", nargs="+", choices=names, default=[], metavar="NAME", help="tools/workloads left out")
    args = parser.parse_args(argv)
    if min(args.jobs, args.rounds, args.samples, args.requeue) < 1:
        parser.error("--jobs, --rounds, --samples and --requeue must be >= 1")
    return args


def selected(args: argparse.Namespace, names: Sequence[str]) -> list[str]:
    wanted = [name for name in args.only if name in names] or list(names)
    return [name for name in wanted if name not in args.skip]


def database_url(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def run_child(key: str, url: str, args: argparse.Namespace, workloads: list[str]) -> dict[str, object] | None:
    module = CHILDREN[key][0]
    options = ["--jobs", str(args.jobs), "--samples", str(args.samples), "--requeue", str(args.requeue)]
    options += ["--timeout", str(args.timeout), "--workloads", *workloads]
    print(f"  {key}:", file=sys.stderr, flush=True)
    try:
        done = subprocess.run(  # noqa: S603 - our interpreter, our module
            [sys.executable, "-m", module, *options],
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": url},
            stdout=subprocess.PIPE,
            text=True,
            timeout=args.timeout * 12,
            check=False,
        )
    except subprocess.TimeoutExpired:
        print(f"  {key}: no answer after {args.timeout * 12:g} s", file=sys.stderr)
        return None
    lines = done.stdout.strip().splitlines()
    if not lines or not lines[-1].startswith("{"):
        print(f"  {key}: exited with {done.returncode}", file=sys.stderr)
        return None
    answer: dict[str, object] = json.loads(lines[-1])
    return answer


def availability(tools: list[str], outcomes: dict[str, Outcome]) -> list[str]:
    """Mark the tools left out or not installed; the versions of the peers that run."""
    notes = []
    for key, _ in TOOLS:
        dist = CHILDREN[key][1]
        if key not in tools:
            outcomes[key].status = "skipped (--only/--skip)"
        elif dist and importlib.util.find_spec(MODULES[dist]) is None:
            outcomes[key].status = "not installed"
        elif dist:
            notes.append(f"{dist} {version(dist)}")
    return notes


def workload_notes(args: argparse.Namespace, workloads: list[str]) -> list[str]:
    """The notes of the workloads that ran and need one."""
    notes = []
    if "latency" in workloads:
        notes.append(f"enqueue to start: {args.samples} samples per round")
    if set(COROUTINES) & set(workloads):
        notes.append(ASYNC)
    if "io-50ms" in workloads:
        notes.append(
            f"io-50ms: each job awaits `asyncio.sleep(0.05)`; N jobs, but at most {IO_JOBS_PER_SLOT} "
            f"per unit of concurrency ({IO_JOBS_PER_SLOT} at concurrency 1: 25 s at best)"
        )
    if "requeue" in workloads:
        notes.append(f"requeue: {args.requeue:,} dead letters, one `requeue_many()`")
    return notes


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    url = os.environ.get("DATABASE_URL")
    if not url:
        sys.exit("bench.sidebyside: DATABASE_URL is not set; run `make bench` or set it")
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"  # the notes only: no migration here
    import django

    django.setup()
    from bench.deadletters import execute

    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    tools = selected(args, [key for key, _ in TOOLS])
    workloads = selected(args, WORKLOADS)
    outcomes = {key: Outcome() for key, _ in TOOLS}
    notes = [*environment(), f"load average (1/5/15 min) at start: {load()}"]
    notes += availability(tools, outcomes)
    running = [key for key in tools if not outcomes[key].status]
    print("\n".join(notes), file=sys.stderr, flush=True)
    databases = {key: f"jobretry_sbs_{key}_{os.getpid()}" for key in running}
    try:
        for name in databases.values():
            execute(f'CREATE DATABASE "{name}"')
        for round_ in range(args.rounds):
            print(f"round {round_ + 1} of {args.rounds}", file=sys.stderr, flush=True)
            for index in range(len(running)):
                key = running[(index + round_) % len(running)]
                if outcomes[key].status:
                    continue
                answer = run_child(key, database_url(url, databases[key]), args, workloads)
                if answer is None:
                    outcomes[key].status = "failed"
                else:
                    outcomes[key].rounds.append(answer)
    finally:
        for name in databases.values():
            execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    notes.append(f"load average (1/5/15 min) at end: {load()}")
    notes += [f"N = {args.jobs:,} jobs, {args.rounds} round(s), median (range)", DEFAULTS]
    notes += workload_notes(args, workloads)
    print("\n" + "\n".join(f"- {note}" for note in notes) + "\n")
    print("\n".join(render(outcomes, workloads)))
    if ratios := async_lines(outcomes):
        print("\n" + "\n".join(ratios))
    print("\nTargets of issue 12, from the medians above:\n")
    print("\n".join(target_lines(outcomes)))
    print("\nWhat each workload left behind (counts and states; checked, not timed):\n")
    print("\n".join(checks(outcomes)))
    failed = any(
        outcome.status == "failed" or any(answer.get("failed") for answer in outcome.rounds)
        for outcome in outcomes.values()
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
