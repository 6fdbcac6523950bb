"""django-tasks-db's figures: ``python -m bench.sidebyside.tasks_db`` on a migrated scratch database.

``django.tasks`` with django-tasks-db's DatabaseBackend (settings_tasks_db.py):
``noop.enqueue()`` in autocommit; workers are ``manage.py db_worker`` with its
defaults (one task at a time, no concurrency option; polling every 1 s). It has
no bulk enqueue and ``django.tasks`` has no retries, so those rows are n/a. It
runs an ``async def`` task with ``async_to_sync``, one at a time like the rest.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench.run import ROOT, query
from bench.sidebyside.workloads import IO_SECONDS, child_args, run

SETTINGS = "bench.sidebyside.settings_tasks_db"


class TasksDb:
    default_concurrency = 1
    default_async_concurrency = 1
    pause = (0.0, 1.0)
    missing = {
        "bulk": "no bulk enqueue API",
        "fail-twice": "django.tasks has no retries",
        "requeue": "ours only",
        "io-50ms-100": "one task at a time, no concurrency option",
    }

    def __init__(self) -> None:
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": SETTINGS}

    def reset(self) -> None:
        from django_tasks_db.models import DBTaskResult

        query(f"TRUNCATE {DBTaskResult._meta.db_table}")

    def enqueue_one(self, number: int) -> None:
        from bench.sidebyside.django_tasks import noop

        noop.enqueue(number)

    def bulk_enqueue(self, count: int) -> None:
        raise NotImplementedError

    def enqueue_many(self, func: str, count: int) -> float:
        from django.db import transaction

        from bench.sidebyside import django_tasks

        with transaction.atomic():
            for number in range(count):
                if func == "sleeps":
                    django_tasks.sleeps.enqueue(number, IO_SECONDS)
                else:
                    (django_tasks.async_noop if func == "async_noop" else django_tasks.noop).enqueue(number)
        return time.perf_counter()

    def commands(self, processes: int, concurrency: int, workload: str) -> list[list[str]]:
        return [[sys.executable, str(ROOT / "manage.py"), "db_worker"]] * processes

    def done(self) -> int:
        from django_tasks_db.models import DBTaskResult

        return int(DBTaskResult.objects.filter(status="SUCCESSFUL").count())  # Any without the extra

    def stored(self) -> int:
        from django_tasks_db.models import DBTaskResult

        return int(DBTaskResult.objects.count())

    def runs_per_job(self) -> float:
        return 0.0

    def stamp(self, number: int) -> None:
        from bench.sidebyside.django_tasks import stamp

        stamp.enqueue(number)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return query(sql, params)


def main(argv: Sequence[str] | None = None) -> int:
    args = child_args(argv)
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return run(TasksDb(), args, lambda figures, checks: None)


if __name__ == "__main__":
    sys.exit(main())
