"""Large tables (issue 12, item 4): drain rate and claim latency with 10^6 succeeded jobs and
10^5 dead letters present, against an empty table; then pruning them while a worker drains.

    make bench-large                                   # embedded PostgreSQL, throwaway
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/large_tables.py

Creates a scratch database next to DATABASE_URL's (the role needs CREATEDB) and
drops it at the end, as bench/deadletters.py does. Each table state gets:

* the claim statement (``claim.claim()``, 10 jobs, all queues) timed
  ``--claims`` times over ready jobs, each in a transaction rolled back so every
  sample sees the same table; p50 and p99;
* enqueue-to-start latency on an idle worker with LISTEN/NOTIFY (as bench/run.py);
* drain rate of ``--jobs`` no-op jobs by one ``manage.py runworker --burst``
  process at ``--concurrency`` 1 and 10, from the database's timestamps (first
  start to last finish) and from process start to exit; the median of ``--rounds``.

First on an empty table, then with ``--succeeded`` succeeded jobs (finished 8 to
15 days ago) and ``--dead`` dead letters, filled with ``INSERT ... SELECT
generate_series`` and VACUUM ANALYZE. Last, ``manage.py prunejobs --older-than
7d`` deletes those succeeded jobs while a worker (``--concurrency 10``) drains
``--jobs`` jobs: its batches (size, count, longest), its total time, the drain
rate beside the one without a prune, the claim latency while the prune still
runs, and every backend of the database seen waiting on a lock (sampled every
20 ms from pg_stat_activity).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import deadletters, run
from bench.large_report import CONCURRENCY, print_report
from bench.prune_watch import LockWatch, Prune

#: The fill's succeeded jobs finished this long ago and earlier; the prune keeps 7 days.
FILLED_AGO = timedelta(days=8)
RETENTION = "7d"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per drain (default %(default)s)")
    parser.add_argument("--succeeded", type=int, default=1_000_000, help="default %(default)s")
    parser.add_argument("--dead", type=int, default=100_000, help="dead letters (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="drains per table state, median (default 3)")
    parser.add_argument("--claims", type=int, default=2_000, help="timed claims (default %(default)s)")
    parser.add_argument("--samples", type=int, default=200, help="enqueue-to-start samples")
    parser.add_argument("--timeout", type=float, default=300.0, help="give up on a drain after this")
    parser.add_argument("--database", help="scratch database (default jobretry_bench_large_<pid>)")
    args = parser.parse_args(argv)
    if min(args.jobs, args.succeeded, args.dead, args.rounds, args.claims, args.samples) < 1:
        parser.error("every count must be >= 1")
    return args


@contextlib.contextmanager
def scratch(name: str) -> Iterator[None]:
    """The scratch database, also for the worker processes (their DATABASE_URL names it)."""
    url = os.environ["DATABASE_URL"]
    with deadletters.scratch_database(name):
        os.environ["DATABASE_URL"] = urlunsplit(urlsplit(url)._replace(path=f"/{name}"))
        try:
            yield
        finally:
            os.environ["DATABASE_URL"] = url


# -- measurements ------------------------------------------------------------------------------


def claim_latency(samples: int, warmup: int = 50) -> list[float]:
    """Milliseconds of ``claim.claim()`` of 10 jobs, each rolled back: the table never changes."""
    from django.db import transaction

    from django_jobretry.jobs import claim

    times: list[float] = []
    for index in range(warmup + samples):
        with transaction.atomic():
            started = time.perf_counter()
            claimed = claim.claim("bench-large-probe", 10, 30.0, None)
            elapsed = time.perf_counter() - started
            transaction.set_rollback(True)
        if len(claimed) != 10:
            sys.exit(f"bench/large_tables.py: a claim took {len(claimed)} jobs, not 10")
        if index >= warmup:
            times.append(elapsed * 1000)
    return times


@dataclass(frozen=True)
class Drain:
    jobs: int
    wall: float  # process start to exit
    span: float  # first started_at to last finished_at of the drained jobs

    @property
    def rate(self) -> float:
        return self.jobs / self.span


def rate(drained: Drain) -> float:
    return drained.rate


def enqueue(jobs: int, chunk: int = 5_000) -> int:
    """``jobs`` ready no-op jobs, ``chunk`` per ``bulk_enqueue()``; the id of the first."""
    run.bulk_enqueue(jobs, chunk)
    table = run.job_table()
    return int(deadletters.execute(f"SELECT min(id) FROM {table} WHERE status = 'ready'")[0][0])  # noqa: S608


@dataclass(frozen=True)
class Burst:
    """A ``runworker --burst`` process draining the jobs from id ``first`` on."""

    worker: subprocess.Popen[bytes]
    log: IO[bytes]
    first: int
    jobs: int
    started: float

    @classmethod
    def start(cls, concurrency: int | None, log: IO[bytes], first: int, jobs: int) -> Burst:
        """None: runworker's default concurrency."""
        options = ["--burst"] if concurrency is None else ["--burst", "--concurrency", str(concurrency)]
        started = time.perf_counter()
        return cls(run.spawn_worker(options, log), log, first, jobs, started)

    def finish(self, timeout: float) -> Drain:
        """Wait for the worker to exit; every job from ``first`` on must have succeeded, at attempt 1."""
        try:
            code = self.worker.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            run.stop(self.worker)
            run.fail(f"drain not finished after {timeout}s", [self.log])
        wall = time.perf_counter() - self.started
        if code != 0:
            run.fail(f"the worker exited with {code}", [self.log])
        table = run.job_table()
        done, once, first_start, last_finish = deadletters.execute(
            "SELECT count(*), count(*) FILTER (WHERE attempts = 1), min(started_at), max(finished_at) "  # noqa: S608
            f"FROM {table} WHERE id >= %s AND status = 'succeeded'",
            [self.first],
        )[0]
        if (done, once) != (self.jobs, self.jobs):
            run.fail(f"{done} of {self.jobs} jobs succeeded, {once} of them at the first attempt", [self.log])
        return Drain(self.jobs, wall, (last_finish - first_start).total_seconds())


def drain(concurrency: int, jobs: int, timeout: float) -> Drain:
    first = enqueue(jobs)
    with tempfile.TemporaryFile() as log:
        return Burst.start(concurrency, log, first, jobs).finish(timeout)


@dataclass
class State:
    claims: list[float] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    drains: dict[int, Drain] = field(default_factory=dict)  # the median round's
    ranges: dict[int, tuple[float, float]] = field(default_factory=dict)  # slowest, fastest jobs/s


def measure(args: argparse.Namespace, label: str) -> State:
    state = State()
    run.bulk_enqueue(1_000, 1_000)
    state.claims = claim_latency(args.claims)
    delete_ready()
    for concurrency in CONCURRENCY:
        rounds = sorted((drain(concurrency, args.jobs, args.timeout) for _ in range(args.rounds)), key=rate)
        state.drains[concurrency] = rounds[len(rounds) // 2]
        state.ranges[concurrency] = (rounds[0].rate, rounds[-1].rate)
        rates = ", ".join(f"{result.rate:,.0f}" for result in rounds)
        print(f"  {label}: drain c{concurrency} {rates} jobs/s", file=sys.stderr, flush=True)
    latency = run.measure_latency(True, args.samples, 10, 1.0, random.Random(1))  # noqa: S311 - pauses
    state.start = latency.start_ms
    return state


def delete_ready() -> None:
    deadletters.execute(f"DELETE FROM {run.job_table()} WHERE status = 'ready'")  # noqa: S608


def fill(args: argparse.Namespace) -> str:
    started = time.perf_counter()
    run.empty_jobs()
    deadletters.fill(args.dead)
    deadletters.fill_succeeded(args.succeeded, ago=FILLED_AGO)
    deadletters.execute("VACUUM ANALYZE")
    return (
        f"filled {args.succeeded:,} succeeded jobs (finished 8 to 15 days ago) and {args.dead:,} dead "
        f"letters, then VACUUM ANALYZE, in {time.perf_counter() - started:.1f} s"
    )


@dataclass
class Pruned:
    prune: Prune
    drain: Drain
    watch: LockWatch
    claims: list[float]
    left: int
    drain_inside: bool  # the prune was still running when the drain ended


def prune_while_draining(args: argparse.Namespace) -> Pruned:
    first = enqueue(args.jobs)
    prune, watch = Prune(RETENTION), LockWatch()
    with tempfile.TemporaryFile() as log:
        prune.start()
        burst = Burst.start(10, log, first, args.jobs)
        watch.watch(lambda: burst.worker.poll() is None)
        result = burst.finish(args.timeout)
    inside = prune.is_alive()
    claims: list[float] = []
    if inside:
        run.bulk_enqueue(1_000, 1_000)
        while prune.is_alive() and len(claims) < args.claims:
            claims += claim_latency(20, warmup=0)
            watch.sample()
    watch.watch(prune.is_alive)
    prune.join()
    if prune.batches.error is not None:
        raise prune.batches.error
    left = deadletters.execute(
        f"SELECT count(*) FROM {run.job_table()} "  # noqa: S608 - the model's table
        "WHERE status = 'succeeded' AND finished_at < now() - %s::interval",
        [FILLED_AGO - timedelta(hours=12)],
    )[0][0]
    return Pruned(prune, result, watch, claims, left, inside)


@contextlib.contextmanager
def scratch_run(kind: str, database: str | None) -> Iterator[list[str]]:
    """Django set up, SIGTERM as an exit, a migrated scratch database; yields the report's notes."""
    deadletters.setup_django()
    from django.core.management import call_command

    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    notes = [*run.environment(), f"load average (1/5/15 min) at start: {run.load()}"]
    print("\n".join(notes), file=sys.stderr, flush=True)
    with scratch(database or f"jobretry_bench_{kind}_{os.getpid()}"):
        call_command("migrate", verbosity=0)
        yield notes
        notes.append(f"load average (1/5/15 min) at end: {run.load()}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with scratch_run("large", args.database) as notes:
        drain(10, min(args.jobs, 1_000), args.timeout)  # warm-up: caches, the first worker's start
        empty = measure(args, "empty")
        notes.append(fill(args))
        print(notes[-1], file=sys.stderr, flush=True)
        large = measure(args, "large")
        pruned = prune_while_draining(args)
    print_report(args, notes, empty, large, pruned)
    return 0


if __name__ == "__main__":
    sys.exit(main())
