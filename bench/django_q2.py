"""django-q2 with and without the adapter: the same tasks through a real cluster, side by side.

    make bench-django-q2                                  # embedded PostgreSQL, throwaway
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/jobretry_bench .venv/bin/python bench/django_q2.py

Each round runs each workload twice on the same database, with django-q2
alone (no ``django_jobretry.contrib.django_q2`` app, no ``JOBRETRY["DJANGO_Q2"]``)
and with the adapter (every task under a policy); bench/settings_django_q2.py.
One run: empty django-q2's queue and task tables; enqueue N tasks with
``async_task`` (not timed: the adapter does nothing at enqueue); start
``manage.py qcluster`` (ORM broker, same database) in a process group of its
own; stop it (SIGTERM, then SIGKILL to the group) once the database counts N
successful django-q2 Task rows (``save_limit`` 0 keeps them all; the monitor
saves a task's row just before acknowledging it). A cluster that exits, or
has not finished after ``--timeout`` seconds, fails the benchmark.

Figures per run: *start to N saved*, tasks/s from starting the process until
N rows are counted (with the cluster's start-up, about 1 s in both modes, and
the monitor catching up); *steady*, (N - 1) / the span between the first and
the last ``stopped`` of those rows (set by the worker as the task returns);
*cluster CPU*, user + system time of the cluster's processes (start-up
included, the database's not) per task: less sensitive to other load.

* ``success``: a no-op task. The adapter's cost: its signal handlers and a
  claim file written and removed per task; no database write.
* ``fail-twice``: each task counts its runs in a table (one statement), raises
  ConnectionError in its first two runs, then succeeds. The adapter retries
  after the policy's 1-2 ms by rewriting the queue row; django-q2 alone
  delivers a failed task again when its lock passes, ``--retry`` seconds after
  it was fetched. Different semantics, not an overhead.

Rounds alternate which mode runs first. The table gives each figure's median
and range over the rounds; "change" compares the medians (negative throughput,
positive CPU: the adapter costs more).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NoReturn

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = "bench.settings_django_q2"
#: The adapter's log line for an outcome that came after django-q2 had delivered the task again.
STALE = "outcome ignored"
STOP_SECONDS = 20.0
#: Q_CLUSTER (timeout, retry) wherever --retry does not apply: docs/django-q2.md's advice.
RECOMMENDED = (30, 60)


@dataclass(frozen=True)
class Workload:
    name: str
    func: str
    tasks: int
    q_cluster: dict[bool, tuple[int, int]]  # adapter? -> Q_CLUSTER (timeout, retry)


@dataclass(frozen=True)
class Run:
    wall: float  # cluster process start -> N successful Task rows counted
    span: float  # first -> last `stopped` of those rows
    runs: int  # task executions (fail-twice), 0: not counted
    stale: int  # outcomes the adapter ignored: django-q2 had delivered the task again
    cpu: float  # user + system seconds of the cluster's processes


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--tasks", type=int, default=2_000, help="tasks per success run (default %(default)s)")
    add("--fail-tasks", type=int, default=500, help="tasks per fail-twice run (default %(default)s)")
    add("--rounds", type=int, default=3, help="rounds (default %(default)s)")
    add("--workers", type=int, default=2, help="Q_CLUSTER workers (default %(default)s)")
    add(
        "--retry",
        type=int,
        default=2,
        help="Q_CLUSTER retry (>= 2 s; timeout 1 s less) of django-q2 alone in fail-twice; the other "
        "clusters: timeout 30, retry 60 (default %(default)s)",
    )
    add("--conn-max-age", type=int, default=60, help="CONN_MAX_AGE of the clusters (default %(default)s)")
    add("--workloads", nargs="+", choices=["success", "fail-twice"], default=["success", "fail-twice"])
    add("--timeout", type=float, default=180.0, help="fail a run after this many seconds")
    add("--reset", action="store_true", help="empty django-q2's queue and task tables first")
    args = parser.parse_args(argv)
    if min(args.tasks, args.fail_tasks, args.rounds, args.workers) < 1:
        parser.error("--tasks, --fail-tasks, --rounds and --workers must be >= 1")
    if args.retry < 2:
        parser.error("--retry must be >= 2 (timeout, one less, must be >= 1)")
    return args


def setup_django() -> None:
    if not os.environ.get("DATABASE_URL"):
        sys.exit("bench/django_q2.py: DATABASE_URL is not set; run `make bench-django-q2` or set it")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ["BENCH_Q2_ADAPTER"] = "0"  # this process only enqueues and counts
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def q_tables() -> str:
    from django_q.models import OrmQ, Task

    return f"{OrmQ._meta.db_table}, {Task._meta.db_table}"


def fail(message: str, log: IO[bytes]) -> NoReturn:
    log.seek(0)
    sys.stderr.write(log.read().decode(errors="replace")[-4000:])
    sys.exit(f"bench/django_q2.py: {message}")


def stop(cluster: subprocess.Popen[bytes]) -> None:
    if cluster.poll() is None:
        cluster.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            cluster.wait(timeout=STOP_SECONDS)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(cluster.pid, signal.SIGKILL)  # whatever of the group is left
    cluster.wait(timeout=STOP_SECONDS)


def run_once(workload: Workload, adapter: bool, args: argparse.Namespace) -> Run:
    from django.db.models import Max, Min
    from django_q.models import Task
    from django_q.tasks import async_task

    from bench.django_q2_tasks import COUNTER
    from bench.run import query

    query(f"TRUNCATE {q_tables()}, {COUNTER}")
    for number in range(workload.tasks):
        async_task(workload.func, number)
    timeout, retry = workload.q_cluster[adapter]
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "PYTHONUNBUFFERED": "1",
        "BENCH_Q2_ADAPTER": "1" if adapter else "0",
        "BENCH_Q2_WORKERS": str(args.workers),
        "BENCH_Q2_TIMEOUT": str(timeout),
        "BENCH_Q2_RETRY": str(retry),
        "BENCH_Q2_CONN_MAX_AGE": str(args.conn_max_age),
    }
    succeeded = Task.objects.filter(success=True)
    with tempfile.TemporaryFile() as log:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        cluster = subprocess.Popen(  # noqa: S603 - our own interpreter and manage.py
            [sys.executable, str(ROOT / "manage.py"), "qcluster"],
            cwd=ROOT,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            while (done := succeeded.count()) < workload.tasks:
                if cluster.poll() is not None:
                    fail(f"qcluster exited with {cluster.returncode}, {done} of {workload.tasks} done", log)
                if time.perf_counter() - started > args.timeout:
                    fail(f"{done} of {workload.tasks} tasks done after {args.timeout:g} s", log)
                time.sleep(0.05)
            wall = time.perf_counter() - started
        finally:
            stop(cluster)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        log.seek(0)
        stale = log.read().decode(errors="replace").count(STALE)
    stats = succeeded.aggregate(first=Min("stopped"), last=Max("stopped"))
    span = (stats["last"] - stats["first"]).total_seconds()
    runs = 0  # the no-op does not count its runs
    if workload.func.endswith("fail_twice"):
        runs = int(query(f"SELECT COALESCE(SUM(runs), 0) FROM {COUNTER}")[0][0])  # noqa: S608
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(
        f"  {workload.name}, {'with the adapter' if adapter else 'alone'}: {workload.tasks / wall:,.0f} "
        f"tasks/s ({wall:.2f} s), span {span:.2f} s, {runs:,} runs, {stale} stale, cluster CPU {cpu:.2f} s",
        file=sys.stderr,
        flush=True,
    )
    return Run(wall, span, runs, stale, cpu)


def report(workload: Workload, results: dict[bool, list[Run]]) -> list[str]:
    """Table rows of one workload: django-q2 alone, with the adapter, and the change."""
    n = workload.tasks
    figures: dict[str, Callable[[Run], float]] = {
        "start": lambda run: n / run.wall,
        # fail-twice: the final runs all come at the end, the span says nothing; shown as "-"
        "steady": lambda run: (n - 1) / run.span if run.span > 0 and workload.name == "success" else 0,
        "cpu": lambda run: run.cpu / n * 1000,
    }
    medians: dict[tuple[str, bool], float] = {}
    rows = []
    for adapter in (False, True):
        runs = results[adapter]
        cells = []
        for name, figure in figures.items():
            values = [figure(run) for run in runs]
            medians[name, adapter] = statistics.median(values)
            unit = ".1f" if name == "cpu" else ",.0f"
            low, high = min(values), max(values)
            cells.append(
                f"{medians[name, adapter]:{unit}} ({low:{unit}}\N{EN DASH}{high:{unit}})" if high else "-"
            )
        stale = sum(run.stale for run in runs)
        executions = statistics.median(run.runs for run in runs)
        per_task = (f"{executions / n:.2f}" if executions else "-") + (f", {stale} stale" if stale else "")
        who = "with the adapter" if adapter else "alone"
        rows.append(f"| {workload.name} | {who} | {n:,} | {per_task} | {' | '.join(cells)} |")
    changes = [
        f"{(medians[name, True] / medians[name, False] - 1) * 100:+.1f} %" if medians[name, False] else "-"
        for name in figures
    ]
    rows.append(f"| {workload.name} | change | | | {' | '.join(changes)} |")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    setup_django()
    from django_q.models import OrmQ, Task

    from bench.django_q2_tasks import COUNTER
    from bench.run import environment, load, query
    from django_jobretry.models import DeadLetter

    if not args.reset and (left := OrmQ.objects.count() + Task.objects.count()):
        sys.exit(
            f"bench/django_q2.py: django-q2's tables hold {left} rows; use a scratch database or --reset"
        )
    alone_fail = (args.retry - 1, args.retry)
    workloads = {
        "success": Workload(
            "success", "bench.django_q2_tasks.noop", args.tasks, {False: RECOMMENDED, True: RECOMMENDED}
        ),
        "fail-twice": Workload(
            "fail-twice",
            "bench.django_q2_tasks.fail_twice",
            args.fail_tasks,
            {False: alone_fail, True: RECOMMENDED},
        ),
    }
    notes = [*environment(), f"load average (1/5/15 min) at start: {load()}"]
    print("\n".join(notes), file=sys.stderr, flush=True)
    dead_before = DeadLetter.objects.count()
    query(f"CREATE UNLOGGED TABLE IF NOT EXISTS {COUNTER} (task integer PRIMARY KEY, runs integer NOT NULL)")
    rows: list[str] = []
    try:
        for name in args.workloads:
            results: dict[bool, list[Run]] = {False: [], True: []}
            for round_ in range(args.rounds):
                for adapter in (False, True) if round_ % 2 == 0 else (True, False):
                    results[adapter].append(run_once(workloads[name], adapter, args))
            rows.extend(report(workloads[name], results))
    finally:
        query(f"DROP TABLE IF EXISTS {COUNTER}")
        query(f"TRUNCATE {q_tables()}")
    notes.append(f"load average (1/5/15 min) at end: {load()}")
    notes.append(
        f"{args.rounds} rounds; Q_CLUSTER workers {args.workers}, timeout {RECOMMENDED[0]}, retry "
        f"{RECOMMENDED[1]}, for django-q2 alone in fail-twice timeout {alone_fail[0]}, "
        f"retry {alone_fail[1]}; "
        f"CONN_MAX_AGE {args.conn_max_age}; dead letters written: {DeadLetter.objects.count() - dead_before}"
    )
    print("\n" + "\n".join(f"- {note}" for note in notes) + "\n")
    print(
        "| workload | django-q2 | tasks | runs per task | tasks/s, start to N saved | tasks/s, steady "
        "| cluster CPU, ms per task |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
