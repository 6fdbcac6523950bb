"""django-q2's figures: ``python -m bench.sidebyside.q2`` on a migrated scratch database.

The ORM broker on the same database (settings_q2.py: bench/settings_django_q2.py
with the adapter off): ``async_task()`` in autocommit, ``manage.py qcluster``
with Q_CLUSTER ``workers`` C (django-q2's default: the CPU count), polling
every 0.2 s (its default ``poll``), CONN_MAX_AGE 60. django-q2 has no bulk
enqueue, and retries only by delivering a task again once its ``retry``
seconds have passed since it was fetched: fail-twice runs with timeout 1 s and
retry 2 s (the least it allows), the other workloads with timeout 30, retry 60.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench.django_q2_tasks import COUNTER
from bench.run import ROOT, query
from bench.sidebyside.workloads import child_args, run

SETTINGS = "bench.sidebyside.settings_q2"
#: django-q2 calls a task's function and keeps what it returns: an ``async def``'s is never awaited.
NO_COROUTINES = "runs no coroutines"
FUNCS = {"noop": "bench.django_q2_tasks.noop", "fail_twice": "bench.django_q2_tasks.fail_twice"}


class DjangoQ2:
    default_concurrency = os.cpu_count() or 1
    default_async_concurrency = 0
    pause = (0.0, 0.2)
    missing = {
        "bulk": "no bulk enqueue API",
        "requeue": "ours only",
        "drain-async": NO_COROUTINES,
        "io-50ms": NO_COROUTINES,
    }

    def __init__(self) -> None:
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": SETTINGS, "BENCH_Q2_ADAPTER": "0"}

    def reset(self) -> None:
        from django_q.models import OrmQ, Task

        query(
            f"CREATE UNLOGGED TABLE IF NOT EXISTS {COUNTER} (task integer PRIMARY KEY, runs integer NOT NULL)"
        )
        query(f"TRUNCATE {OrmQ._meta.db_table}, {Task._meta.db_table}, {COUNTER}")

    def enqueue_one(self, number: int) -> None:
        from django_q.tasks import async_task

        async_task(FUNCS["noop"], number)

    def bulk_enqueue(self, count: int) -> None:
        raise NotImplementedError

    def enqueue_many(self, func: str, count: int) -> float:
        from django.db import transaction
        from django_q.tasks import async_task

        with transaction.atomic():
            for number in range(count):
                async_task(FUNCS[func], number)
        return time.perf_counter()

    def commands(self, processes: int, concurrency: int, workload: str) -> list[list[str]]:
        timeout, retry = (1, 2) if workload == "fail-twice" else (30, 60)
        options = [
            f"BENCH_Q2_WORKERS={concurrency}",
            f"BENCH_Q2_TIMEOUT={timeout}",
            f"BENCH_Q2_RETRY={retry}",
        ]
        command = ["/usr/bin/env", *options, sys.executable, str(ROOT / "manage.py"), "qcluster"]
        return [command] * processes

    def done(self) -> int:
        from django_q.models import Task

        return int(Task.objects.filter(success=True).count())

    def stored(self) -> int:
        from django_q.models import OrmQ

        return int(OrmQ.objects.count())

    def runs_per_job(self) -> float:
        runs, tasks = query(f"SELECT COALESCE(SUM(runs), 0), COUNT(*) FROM {COUNTER}")[0]  # noqa: S608
        return float(runs) / tasks if tasks else 0.0

    def stamp(self, number: int) -> None:
        from django_q.tasks import async_task

        async_task("bench.sidebyside.stamps.record", number)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return query(sql, params)


def main(argv: Sequence[str] | None = None) -> int:
    args = child_args(argv)
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ["BENCH_Q2_ADAPTER"] = "0"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return run(DjangoQ2(), args, lambda figures, checks: None)


if __name__ == "__main__":
    sys.exit(main())
