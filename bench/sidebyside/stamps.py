"""The first line of every latency job: the time it started, for harness.start_latencies.

Plain functions on Django's connection, shared by the Django-based tools
(django-q2 calls ``record`` by its dotted path; ours and django-tasks-db wrap
it in a job and a task). procrastinate's task writes the same row itself.
"""

from __future__ import annotations

import time

from bench.sidebyside.harness import STARTS

INSERT = f"INSERT INTO {STARTS} (n, at) VALUES (%(n)s, %(at)s) ON CONFLICT (n) DO NOTHING"  # noqa: S608


def record(number: int) -> None:
    started = time.time()
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(INSERT, {"n": number, "at": started})
