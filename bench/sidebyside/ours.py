"""django-jobretry's figures: ``python -m bench.sidebyside.ours`` on a migrated scratch database.

Enqueue is the test app's ``noop.enqueue()`` / ``bulk_enqueue()`` (bench/run.py's
loops); workers are ``manage.py runworker --concurrency C`` (default 10, LISTEN/NOTIFY
on, POLL_SECONDS 1 s); fail-twice is jobs.py's job under the ``bench-1ms`` policy;
requeue is ``deadletters.requeue_many()`` over bench/deadletters.py's dead letters.
The ``async def`` workloads run the test app's async ``noop`` and jobs.py's
``sleeps`` under ``runworker --async-concurrency C`` (default 100; ``--concurrency``
left at its default).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench.run import ROOT, bulk_enqueue, noop_job, query
from bench.sidebyside.harness import Failed
from bench.sidebyside.workloads import COROUTINES, IO_SECONDS, child_args, progress, run

SETTINGS = "bench.sidebyside.settings_ours"
CHUNK = 5_000


def definition(func: str) -> Any:
    """The job behind an ``enqueue_many`` name (workloads.Tool)."""
    from bench.sidebyside import jobs
    from tests.jobs_app import async_jobs

    found = {"noop": noop_job(), "async_noop": async_jobs.noop, "sleeps": jobs.sleeps}
    return found[func] if func != "fail_twice" else jobs.fail_twice


def arguments(func: str, number: int) -> tuple[object, ...]:
    return {"fail_twice": (number,), "sleeps": (number, IO_SECONDS)}.get(func, ())


class Ours:
    pause = (0.005, 0.025)
    missing: dict[str, str] = {}

    def __init__(self) -> None:
        from django_jobretry.worker.lifecycle import WorkerOptions

        self.default_concurrency = WorkerOptions.concurrency
        self.default_async_concurrency = WorkerOptions.async_concurrency
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": SETTINGS}

    def reset(self) -> None:
        from django_jobretry.models import DeadLetter, Job

        query(f"TRUNCATE {Job._meta.db_table}, {DeadLetter._meta.db_table}")

    def enqueue_one(self, number: int) -> None:
        noop_job().enqueue()

    def bulk_enqueue(self, count: int) -> None:
        bulk_enqueue(count, CHUNK)

    def enqueue_many(self, func: str, count: int) -> float:
        from django.db import transaction

        job = definition(func)
        with transaction.atomic():
            for start in range(0, count, CHUNK):
                numbers = range(start, min(start + CHUNK, count))
                job.bulk_enqueue([(arguments(func, number), {}) for number in numbers])
        return time.perf_counter()

    def commands(self, processes: int, concurrency: int, workload: str) -> list[list[str]]:
        # The concurrency of the ``async def`` workloads is the event loop's; the threads keep their default.
        option = "--async-concurrency" if workload in COROUTINES else "--concurrency"
        command = [sys.executable, str(ROOT / "manage.py"), "runworker", option, str(concurrency)]
        return [command] * processes

    def done(self) -> int:
        from django_jobretry.models import Job

        return Job.objects.filter(status="succeeded").count()

    def stored(self) -> int:
        from django_jobretry.models import Job

        return Job.objects.count()

    def runs_per_job(self) -> float:
        from django.db.models import Avg

        from django_jobretry.models import Job

        average = Job.objects.filter(task_name__endswith="fail_twice", status="succeeded").aggregate(
            runs=Avg("attempts")
        )["runs"]
        return float(average or 0)

    def stamp(self, number: int) -> None:
        from bench.sidebyside import jobs

        jobs.stamp.enqueue(number)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return query(sql, params)


def requeue(count: int, figures: dict[str, float], checks: dict[str, str]) -> None:
    """``count`` dead letters (bench/deadletters.py's mix), all requeued by one requeue_many()."""
    from bench.deadletters import fill
    from django_jobretry import deadletters
    from django_jobretry.models import DeadLetter, Job

    Ours().reset()
    fill(count)
    started = time.perf_counter()
    result = deadletters.requeue_many(DeadLetter.objects.all(), actor="bench")
    figures["requeue"] = count / (time.perf_counter() - started)
    ready = Job.objects.filter(status="ready").count()
    checks["requeue"] = (
        f"{len(result.done):,} requeued, {ready:,} ready, {DeadLetter.objects.count()} dead left"
    )
    if ready != count:
        raise Failed(f"requeue left {ready} of {count} jobs ready")
    progress(f"requeue: {figures['requeue']:,.0f} dead letters/s")


def main(argv: Sequence[str] | None = None) -> int:
    args = child_args(argv)
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return run(Ours(), args, lambda figures, checks: requeue(args.requeue, figures, checks))


if __name__ == "__main__":
    sys.exit(main())
