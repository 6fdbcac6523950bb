"""Throughput and latency of the worker engine against a real PostgreSQL.

    make bench                                    # embedded PostgreSQL, throwaway
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/jobretry_bench .venv/bin/python bench/run.py

Against DATABASE_URL (migrated first), with the test app's ``noop`` job:

* enqueue rate: ``noop.enqueue()`` one by one (one transaction and NOTIFY each),
  and ``noop.bulk_enqueue()`` (one INSERT per chunk);
* drain rate: N ready no-op jobs run by ``manage.py runworker --burst`` in 1 and
  in 2 processes, timed from starting the processes until the database counts N
  succeeded jobs (and, for comparison, the span between the first ``started_at``
  and the last ``finished_at``, which leaves out process start-up);
* enqueue-to-start latency on an idle worker: one job at a time, the Job row's
  ``started_at - enqueued_at`` (both database timestamps; ``started_at`` is set
  by the claim), with LISTEN/NOTIFY and with ``--no-listen`` (polling every
  POLL_SECONDS).

It prints a Markdown table. The job table must be empty, so use a scratch
database; ``--reset`` empties it first (it deletes every job in it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import IO, Any, NoReturn

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = "bench.settings"


@dataclass
class Row:
    """One line of the results table."""

    measurement: str
    count: int
    result: str
    detail: str = ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        print(f"  {row.measurement}: {row.result}  {row.detail}", file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs drained per run (default %(default)s)")
    parser.add_argument(
        "--single", type=int, default=2_000, help="jobs enqueued one by one (default %(default)s)"
    )
    parser.add_argument(
        "--bulk-chunk", type=int, default=5_000, help="jobs per bulk_enqueue() call (default %(default)s)"
    )
    parser.add_argument(
        "--processes",
        type=int,
        nargs="+",
        default=[1, 2],
        help="worker process counts for the drain (default: 1 2)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=[1, 10],
        help="runworker --concurrency values for the drain (default: 1 10; 1 is runworker's default)",
    )
    parser.add_argument(
        "--samples", type=int, default=300, help="latency samples with LISTEN/NOTIFY (default %(default)s)"
    )
    parser.add_argument(
        "--poll-samples",
        type=int,
        default=30,
        help="latency samples with --no-listen; each takes about POLL_SECONDS (default %(default)s)",
    )
    parser.add_argument(
        "--poll-seconds",
        type=float,
        default=1.0,
        help="JOBRETRY POLL_SECONDS of the workers (default %(default)s, the library default)",
    )
    parser.add_argument("--warmup", type=int, default=10, help="latency samples discarded first")
    parser.add_argument("--timeout", type=float, default=120.0, help="give up on a drain after this")
    parser.add_argument("--reset", action="store_true", help="delete every job in the database first")
    parser.add_argument("--seed", type=int, default=1, help="seed of the pauses between latency samples")
    parser.add_argument(
        "--explain", action="store_true", help="then run bench/explain.py (the claim query's plan)"
    )
    args = parser.parse_args(argv)
    for name in ("jobs", "single", "bulk_chunk", "samples", "poll_samples"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if min(args.processes) < 1 or min(args.concurrency) < 1:
        parser.error("--processes and --concurrency values must be >= 1")
    return args


def setup_django(poll_seconds: float) -> None:
    if not os.environ.get("DATABASE_URL"):
        sys.exit("bench/run.py: DATABASE_URL is not set; run `make bench` or set it to a scratch database")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ["BENCH_POLL_SECONDS"] = str(poll_seconds)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


# -- database helpers --------------------------------------------------------------------------


def query(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []


def job_table() -> str:
    from django_jobretry.models import Job

    return Job._meta.db_table


def empty_jobs() -> None:
    """A fresh table (and claim index) for every measurement: no dead rows left by the previous one."""
    query(f"TRUNCATE {job_table()}")


def count_jobs(status: str | None = None) -> int:
    from django_jobretry.models import Job

    jobs = Job.objects.all() if status is None else Job.objects.filter(status=status)
    return jobs.count()


# -- enqueue -----------------------------------------------------------------------------------


def noop_job() -> Any:
    from tests.jobs_app.jobs import noop

    return noop


def bench_single_enqueue(count: int) -> float:
    noop = noop_job()
    started = time.perf_counter()
    for _ in range(count):
        noop.enqueue()
    return count / (time.perf_counter() - started)


def print_drain_ratios(jobs: int, rounds: int, rates: dict[str, list[float]], base: str) -> None:
    """The drain benchmarks' table: each setup's median jobs/s, its range and its ratio to ``base``."""
    reference = statistics.median(rates[base])
    print(f"drain of {jobs} no-op jobs, 1 process at --concurrency 10, {rounds} rounds")
    print(f"| setup | median jobs/s | range | ratio to {base} |")
    print("|---|---:|---:|---:|")
    for label, values in rates.items():
        median = statistics.median(values)
        print(
            f"| {label} | {median:,.0f} | {min(values):,.0f}-{max(values):,.0f} | {median / reference:.2f} |"
        )


def bulk_enqueue(count: int, chunk: int) -> float:
    noop = noop_job()
    started = time.perf_counter()
    left = count
    while left > 0:
        size = min(chunk, left)
        noop.bulk_enqueue([((), {})] * size)
        left -= size
    return count / (time.perf_counter() - started)


# -- workers -----------------------------------------------------------------------------------


def worker_env() -> dict[str, str]:
    return {**os.environ, "DJANGO_SETTINGS_MODULE": SETTINGS, "PYTHONUNBUFFERED": "1"}


def spawn_worker(options: Sequence[str], log: IO[bytes]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # noqa: S603 - our own interpreter and manage.py
        [sys.executable, str(ROOT / "manage.py"), "runworker", *options],
        cwd=ROOT,
        env=worker_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def fail(message: str, logs: Sequence[IO[bytes]]) -> NoReturn:
    for log in logs:
        log.seek(0)
        sys.stderr.write(log.read().decode(errors="replace")[-4000:])
    sys.exit(f"bench/run.py: {message}")


def wait_for(condition: Callable[[], bool], timeout: float, what: str, logs: Sequence[IO[bytes]]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            fail(f"timed out after {timeout}s waiting for {what}", logs)
        time.sleep(0.01)


@dataclass(frozen=True)
class Drain:
    wall: float  # from starting the processes until N succeeded jobs were counted
    span: float  # last finished_at - first started_at, in the database
    multiple_attempts: int


def stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def drain(processes: int, concurrency: int, jobs: int, timeout: float) -> Drain:
    """Start the burst workers and time them until the database counts ``jobs`` succeeded."""
    from django.db.models import Count, Max, Min, Q

    from django_jobretry.models import Job

    options = ["--burst", "--concurrency", str(concurrency)]
    with contextlib.ExitStack() as stack:
        logs = [stack.enter_context(tempfile.TemporaryFile()) for _ in range(processes)]
        started = time.perf_counter()
        workers = [spawn_worker(options, log) for log in logs]
        for worker in workers:
            stack.callback(stop, worker)
        deadline = started + timeout
        while count_jobs("succeeded") < jobs:
            if time.perf_counter() > deadline:
                fail(f"drain not finished after {timeout}s", logs)
            if all(worker.poll() is not None for worker in workers) and count_jobs("succeeded") < jobs:
                fail(f"workers exited with {count_jobs('succeeded')} of {jobs} jobs done", logs)
            time.sleep(0.02)
        wall = time.perf_counter() - started
        for worker in workers:
            if worker.wait(timeout=60) != 0:
                fail(f"a worker exited with {worker.returncode}", logs)
    stats = Job.objects.filter(status="succeeded").aggregate(
        first=Min("started_at"), last=Max("finished_at"), multiple=Count("id", filter=~Q(attempts=1))
    )
    return Drain(wall, (stats["last"] - stats["first"]).total_seconds(), stats["multiple"])


@dataclass(frozen=True)
class Latencies:
    start_ms: list[float]
    finish_ms: list[float]


def wait_listening(logs: Sequence[IO[bytes]]) -> None:
    def listening() -> bool:
        rows = query(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
            "AND query = 'LISTEN django_jobretry' AND pid <> pg_backend_pid()"
        )
        return bool(rows)

    wait_for(listening, 30, "the worker's LISTEN connection", logs)


def measure_latency(
    listen: bool, samples: int, warmup: int, poll_seconds: float, rng: random.Random
) -> Latencies:
    """One idle worker; one job enqueued at a time, the next only once the previous succeeded."""
    from django_jobretry.models import Job

    noop = noop_job()
    start_ms: list[float] = []
    finish_ms: list[float] = []
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(tempfile.TemporaryFile())
        worker = spawn_worker(["--concurrency", "1", *([] if listen else ["--no-listen"])], log)
        stack.callback(stop, worker)
        if listen:
            wait_listening([log])
        for index in range(warmup + samples):
            job_id = noop.enqueue().pk
            stamps: list[tuple[Any, Any, Any]] = []

            def succeeded(job_id: int = job_id, stamps: list[tuple[Any, Any, Any]] = stamps) -> bool:
                stamps[:] = Job.objects.filter(pk=job_id, status="succeeded").values_list(
                    "enqueued_at", "started_at", "finished_at"
                )
                return bool(stamps)

            wait_for(succeeded, 30 + poll_seconds, f"job {job_id} to run", [log])
            enqueued_at, started_at, finished_at = stamps[0]
            if index >= warmup:
                start_ms.append((started_at - enqueued_at).total_seconds() * 1000)
                finish_ms.append((finished_at - enqueued_at).total_seconds() * 1000)
            # Idle again before the next job; without LISTEN a random pause puts
            # the enqueue at a random point of the worker's poll cycle.
            time.sleep(rng.uniform(0.005, 0.025) if listen else rng.uniform(0, poll_seconds))
    return Latencies(start_ms, finish_ms)


# -- report ------------------------------------------------------------------------------------


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def describe_latency(values: Sequence[float]) -> str:
    return (
        f"p50 {statistics.median(values):.1f} ms, p90 {percentile(values, 90):.1f} ms, "
        f"p99 {percentile(values, 99):.1f} ms, max {max(values):.1f} ms"
    )


def environment() -> list[str]:
    from django.db import connection

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    server = query("SHOW server_version")[0][0]
    settings = ", ".join(
        f"{name}={query(f'SHOW {name}')[0][0]}" for name in ("shared_buffers", "synchronous_commit", "fsync")
    )
    host = connection.settings_dict["HOST"] or "local socket"
    return [
        f"machine: {os.cpu_count()} CPUs, {cpu}",
        f"Python {platform.python_version()}, Django {version('django')}, psycopg {version('psycopg')}",
        f"PostgreSQL {server} at {host} ({settings})",
    ]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def print_report(report: Report) -> None:
    print()
    for note in report.notes:
        print(f"- {note}")
    print()
    print("| measurement | jobs | result | detail |")
    print("| --- | ---: | ---: | --- |")
    for row in report.rows:
        print(f"| {row.measurement} | {row.count:,} | {row.result} | {row.detail} |")


# -- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    setup_django(args.poll_seconds)
    if args.reset:
        empty_jobs()
    elif count_jobs():
        sys.exit(
            f"bench/run.py: the job table has {count_jobs()} jobs; use a scratch database or --reset "
            "(which deletes them)"
        )
    report = Report()
    report.notes.extend(environment())
    report.notes.append(f"load average (1/5/15 min) at start: {load()}")
    print("\n".join(report.notes), file=sys.stderr)

    rate = bench_single_enqueue(args.single)
    report.add(Row("`enqueue()`, one transaction each", args.single, f"{rate:,.0f} jobs/s"))
    empty_jobs()

    for processes in args.processes:
        for concurrency in args.concurrency:
            rate = bulk_enqueue(args.jobs, args.bulk_chunk)
            report.add(
                Row(
                    "`bulk_enqueue()`",
                    args.jobs,
                    f"{rate:,.0f} jobs/s",
                    f"{args.bulk_chunk:,} jobs per call",
                )
            )
            result = drain(processes, concurrency, args.jobs, args.timeout)
            if result.multiple_attempts:
                report.notes.append(
                    f"{result.multiple_attempts} jobs took more than one attempt in the drain with "
                    f"{processes} process(es), --concurrency {concurrency}"
                )
            report.add(
                Row(
                    f"drain, {processes} process{'es' if processes > 1 else ''}, --concurrency {concurrency}",
                    args.jobs,
                    f"{args.jobs / result.wall:,.0f} jobs/s",
                    f"{result.wall:.2f} s from process start; database span {result.span:.2f} s "
                    f"= {args.jobs / result.span:,.0f} jobs/s",
                )
            )
            empty_jobs()

    rng = random.Random(args.seed)  # noqa: S311 - pauses between samples, not security
    for listen, samples in ((True, args.samples), (False, args.poll_samples)):
        latencies = measure_latency(listen, samples, args.warmup, args.poll_seconds, rng)
        how = "LISTEN/NOTIFY" if listen else f"`--no-listen`, POLL_SECONDS={args.poll_seconds:g}"
        report.add(
            Row(f"enqueue to start, idle worker, {how}", samples, describe_latency(latencies.start_ms))
        )
        report.add(
            Row(
                f"enqueue to finished, idle worker, {how}",
                samples,
                describe_latency(latencies.finish_ms),
            )
        )
        empty_jobs()

    report.notes.append(f"load average (1/5/15 min) at end: {load()}")
    print_report(report)
    if args.explain:
        print(flush=True)
        explain = [sys.executable, str(ROOT / "bench" / "explain.py")]
        return subprocess.call(explain, env=worker_env())  # noqa: S603 - our own script
    return 0


if __name__ == "__main__":
    sys.exit(main())
