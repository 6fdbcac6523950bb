"""Memory (issue 12, item 5): a worker's RSS while it processes 10^6 no-op jobs.

    make bench-memory                                  # embedded PostgreSQL, throwaway
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/memory.py --jobs 300000

In a scratch database next to DATABASE_URL's (created and always dropped, as
bench/deadletters.py does): ``--jobs`` no-op jobs are stored with
``noop.bulk_enqueue()`` (``--chunk`` per call), then one ``manage.py runworker
--burst`` process (default concurrency, bench settings with DEBUG off as
deployed; ``--debug`` turns it on) runs them all while its VmRSS is
read from /proc/<pid>/status every ``--every`` seconds, with how many jobs it
has done (from the claim index: the next ready job's id). Reported: RSS at
start, after warm-up (the first ``--warmup`` jobs, default 5 %), the largest
after warm-up, at the end, the growth after warm-up (the target: under 10 MB),
and jobs/s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import deadletters, run
from bench.large_tables import Burst, enqueue, scratch_run

#: The issue's target for the growth after warm-up.
TARGET_MB = 10.0
#: The next job a worker claims: the claim's own order, so the claim index answers at once.
NEXT_READY = """
    SELECT id FROM {table} WHERE status = 'ready' ORDER BY priority DESC, run_at, id LIMIT 1
"""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs run (default %(default)s)")
    parser.add_argument("--chunk", type=int, default=10_000, help="jobs per bulk_enqueue() call")
    parser.add_argument("--warmup", type=int, help="jobs of warm-up (default 5 %% of --jobs)")
    parser.add_argument("--every", type=float, default=1.0, help="seconds between RSS samples")
    parser.add_argument(
        "--debug", action="store_true", help="the worker with DEBUG on (Django then logs its statements)"
    )
    parser.add_argument("--timeout", type=float, default=3600.0, help="give up on the drain after this")
    parser.add_argument("--database", help="scratch database (default jobretry_bench_memory_<pid>)")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.chunk < 1 or args.every <= 0:
        parser.error("--jobs and --chunk must be >= 1, --every > 0")
    if args.warmup is None:
        args.warmup = args.jobs // 20
    return args


@dataclass(frozen=True)
class Sample:
    seconds: float
    done: int
    rss_kb: int


def rss_kb(pid: int) -> int | None:
    """VmRSS of ``pid`` in kB; None once it has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    line = next((line for line in status.splitlines() if line.startswith("VmRSS:")), None)
    return int(line.split()[1]) if line else None


def jobs_done(first: int, jobs: int) -> int:
    """Jobs claimed so far (running ones included): the worker claims in id order here."""
    rows = deadletters.execute(NEXT_READY.format(table=run.job_table()))
    return rows[0][0] - first if rows else jobs


def watch(burst: Burst, every: float) -> list[Sample]:
    samples: list[Sample] = []
    while burst.worker.poll() is None:
        rss = rss_kb(burst.worker.pid)
        done = jobs_done(burst.first, burst.jobs)
        if rss is not None:
            samples.append(Sample(time.perf_counter() - burst.started, done, rss))
        time.sleep(every)
    return samples


def mb(kb: float) -> str:
    return f"{kb / 1024:,.1f} MB"


def print_report(args: argparse.Namespace, notes: list[str], samples: list[Sample], rate: float) -> None:
    after = [sample for sample in samples if sample.done >= args.warmup]
    print()
    for note in notes:
        print(f"- {note}")
    print()
    print("| measurement | result |")
    print("| --- | --- |")
    print(f"| jobs run | {args.jobs:,} at {rate:,.0f} jobs/s ({len(samples)} RSS samples) |")
    print(f"| RSS at start | {mb(samples[0].rss_kb) if samples else '-'} |")
    if not after:
        print(f"| RSS after warm-up ({args.warmup:,} jobs) | - (no sample after warm-up) |")
        return
    warm, end = after[0], after[-1]
    largest = max(sample.rss_kb for sample in after)
    growth = end.rss_kb - warm.rss_kb
    print(f"| RSS after warm-up ({warm.done:,} jobs) | {mb(warm.rss_kb)} |")
    print(f"| RSS largest after warm-up | {mb(largest)} |")
    print(f"| RSS at the end ({end.done:,} jobs) | {mb(end.rss_kb)} |")
    print(f"| growth after warm-up | {mb(growth)} (largest {mb(largest - warm.rss_kb)}) |")
    met = "met" if largest - warm.rss_kb < TARGET_MB * 1024 else "NOT met"
    print(f"| target: growth under {TARGET_MB:.0f} MB | {met} |")
    print()
    print("| jobs done | seconds | RSS |")
    print("| ---: | ---: | ---: |")
    tenth, shown = max(args.jobs // 10, 1), -1
    for sample in samples:
        if sample.done // tenth > shown or sample is samples[-1]:
            shown = sample.done // tenth
            print(f"| {sample.done:,} | {sample.seconds:.0f} | {mb(sample.rss_kb)} |")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # As deployed: DEBUG off, or Django's log of each connection's last 9,000 statements grows RSS.
    os.environ["BENCH_DEBUG"] = "1" if args.debug else "0"
    with scratch_run("memory", args.database) as notes:
        started = time.perf_counter()
        first = enqueue(args.jobs, args.chunk)
        enqueue_rate = args.jobs / (time.perf_counter() - started)
        deadletters.execute(f"VACUUM ANALYZE {run.job_table()}")
        notes.append(
            f"{args.jobs:,} jobs stored by bulk_enqueue() at {enqueue_rate:,.0f} jobs/s; "
            f"the worker's DEBUG={args.debug}"
        )
        print(notes[-1], file=sys.stderr, flush=True)
        with tempfile.TemporaryFile() as log:
            burst = Burst.start(None, log, first, args.jobs)
            samples = watch(burst, args.every)
            drained = burst.finish(args.timeout)
    print_report(args, notes, samples, args.jobs / drained.wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
