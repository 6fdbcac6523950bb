"""Where a burst worker's time goes: SQL round trips versus Python, per statement kind.

    DATABASE_URL=postgres://... .venv/bin/python bench/profile_worker.py --jobs 5000 --concurrency 1

Enqueues N no-op jobs into an empty job table, then runs the same Worker that
`manage.py runworker --burst` runs, in this process, with the main loop's
statements timed (an execute wrapper on its connection) and, with --cprofile,
the main loop under cProfile. The job table is emptied again at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


#: (what a main-loop statement contains, what it is), the first match wins.
KINDS = (
    ("with done as", "succeed and claim"),
    ("lease_owner = %(owner)s", "claim"),
    ("set status = 'succeeded'", "succeed"),
    ("status = 'running' and lease_expires_at <", "recover_expired"),
    ("for update of j", "lock failed"),
    ("set status = 'ready', run_at", "schedule retries"),
)


def statement_kind(sql: str) -> str:
    text = " ".join(sql.split()).lower()
    for part, kind in KINDS:
        if part in text:
            return kind
    if text in ("begin", "commit") or text.startswith(("savepoint", "release savepoint", "set ")):
        return text.split()[0]
    return text[:40]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=5_000, help="no-op jobs to drain (default %(default)s)")
    parser.add_argument("--concurrency", type=int, default=1, help="as runworker --concurrency")
    parser.add_argument("--cprofile", action="store_true", help="also print the top functions by own time")
    parser.add_argument(
        "--fail-twice",
        action="store_true",
        help="jobs that fail twice then succeed (1 ms backoff) instead of no-ops",
    )
    return parser.parse_args(argv)


def setup_django() -> None:
    if not os.environ.get("DATABASE_URL"):
        sys.exit("bench/profile_worker.py: DATABASE_URL is not set")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    # The side-by-side bench's settings: bench/settings.py plus its 1 ms retry policy.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.sidebyside.settings_ours")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


class StatementTimer:
    """A Django execute wrapper adding up the time of each kind of statement."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            kind = statement_kind(sql)
            self.seconds[kind] += time.perf_counter() - started
            self.calls[kind] += 1

    def print(self, wall: float) -> None:
        print(f"{'main-loop statement':<24}{'calls':>8}{'total s':>10}{'ms/call':>10}{'% of wall':>11}")
        for kind in sorted(self.seconds, key=self.seconds.__getitem__, reverse=True):
            seconds, calls = self.seconds[kind], self.calls[kind]
            print(
                f"{kind:<24}{calls:>8}{seconds:>10.2f}{1000 * seconds / calls:>10.3f}"
                f"{100 * seconds / wall:>10.1f}%"
            )
        rest = wall - sum(self.seconds.values())
        print(f"{'everything else':<24}{'':>8}{rest:>10.2f}{'':>10}{100 * rest / wall:>10.1f}%")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    setup_django()
    import logging

    from django.db import connection

    from bench.sidebyside.jobs import fail_twice
    from django_jobretry.models import Job
    from django_jobretry.worker import Worker, WorkerOptions
    from tests.jobs_app.jobs import noop

    if Job.objects.exists():
        sys.exit("bench/profile_worker.py: the job table is not empty; use a scratch database")
    logging.getLogger("django_jobretry").setLevel(logging.INFO)  # as runworker -v 1
    if args.fail_twice:
        fail_twice.bulk_enqueue([((number,), {}) for number in range(args.jobs)])
    else:
        noop.bulk_enqueue([((), {})] * args.jobs)

    timer = StatementTimer()
    # A burst could end while a 1 ms retry is not yet due: stop after every attempt instead.
    attempts = 3 * args.jobs if args.fail_twice else None
    worker = Worker(
        WorkerOptions(burst=attempts is None, max_jobs=attempts, concurrency=args.concurrency, listen=False)
    )
    profiler = cProfile.Profile() if args.cprofile else None
    started = time.perf_counter()
    with connection.execute_wrapper(timer):
        if profiler is not None:
            profiler.enable()
        worker.run()
        if profiler is not None:
            profiler.disable()
    wall = time.perf_counter() - started
    done = Job.objects.filter(status="succeeded").count()
    Job.objects.all().delete()

    print(f"{done:,} jobs in {wall:.2f} s = {done / wall:,.0f} jobs/s (--concurrency {args.concurrency})")
    timer.print(wall)
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
