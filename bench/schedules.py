"""What periodic schedules cost a worker: one look at N declared schedules, idle and with slots due.

    make bench BENCH_SCHEDULE_ARGS="--schedules 1000 --repeat 21"    # embedded PostgreSQL, throwaway
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scratch .venv/bin/python bench/schedules.py

Against DATABASE_URL (migrated first; the schedules it declares and the runs
it inserts are deleted at the end), with ``--schedules`` schedules of the test
app's ``noop`` job, each ``every`` k minutes (k = 1..10, so all fall on minute
boundaries, about 29 % of them due in any one minute):

* declare: the statement each worker runs once at start;
* an idle look (nothing due): what a scheduler thread pays each time it wakes
  with nothing to do, at most every 30 s, plus once per due minute;
* a look with 1, 10 % and all of the schedules due: the transaction that locks
  them, inserts one run each and moves them on.

Each look runs ``--repeat`` times; the table gives the median and slowest and the
statements sent. The last line estimates the database time per minute of one
worker: one due look for the schedules due in a minute, plus two idle looks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SETTINGS = "bench.settings"
PREFIX = "bench-schedule-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=21)
    options = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        report(options.schedules, options.repeat)
    finally:
        clean()


def report(count: int, repeat: int) -> None:
    from django.db import connection
    from django.db.models.functions import Now
    from django.test.utils import CaptureQueriesContext

    from django_jobretry.models import Schedule
    from django_jobretry.policy.slots import Cadence, Overlap
    from django_jobretry.schedules import ScheduleSpec
    from django_jobretry.schedules.rows import declare_rows
    from django_jobretry.schedules.runs import run_due

    specs = {
        f"{PREFIX}{i}": ScheduleSpec(
            name=f"{PREFIX}{i}",
            task_name="tests.jobs_app.jobs.noop",
            cadence=Cadence(every=timedelta(minutes=1 + i % 10)),
            overlap=Overlap.ALLOW,
        )
        for i in range(count)
    }
    rows: list[tuple[str, float, float, int]] = []

    def measure(label: str, prepare: Callable[[], None], action: Callable[[], object]) -> float:
        times, statements = [], 0
        for _ in range(repeat):
            prepare()
            with CaptureQueriesContext(connection) as captured:
                start = time.perf_counter()
                action()
                times.append((time.perf_counter() - start) * 1000)
            statements = len(captured.captured_queries)
        median = statistics.median(times)
        rows.append((label, median, max(times), statements))
        return median

    def due(n: int) -> Callable[[], None]:
        def prepare() -> None:  # one slot due a second ago for each of the first n
            names = list(specs)[:n]
            Schedule.objects.filter(name__in=names).update(next_slot=Now() - timedelta(seconds=1))

        return prepare

    declare = measure("declare (once per worker start)", lambda: None, lambda: declare_rows(specs))
    idle = measure("look, nothing due", lambda: None, lambda: run_due(specs))
    measure("look, 1 due", due(1), lambda: run_due(specs))
    measure(f"look, {count // 10} due", due(count // 10), lambda: run_due(specs))
    every_one = measure(f"look, all {count} due", due(count), lambda: run_due(specs))
    print(f"{count} schedules declared; {repeat} runs of each measurement; declare took {declare:.1f} ms")
    print("| look | median ms | slowest ms | statements |")
    print("|---|---:|---:|---:|")
    for label, median, slowest, statements in rows:
        print(f"| {label} | {median:.2f} | {slowest:.2f} | {statements} |")
    per_minute_due = sum(1 / (1 + i % 10) for i in range(count))
    estimate = 2 * idle + every_one * per_minute_due / count
    print(
        f"about {per_minute_due:.0f} runs a minute: one worker spends about {estimate:.1f} ms of database "
        "time a minute on them (one look for the due slots, scaled from the all-due look, and two idle looks)"
    )


def clean() -> None:
    from django_jobretry.models import Job, Schedule

    Job.objects.filter(schedule_name__startswith=PREFIX).delete()
    Schedule.objects.filter(name__startswith=PREFIX).delete()


if __name__ == "__main__":
    main()
