"""Limited test jobs: each writes a ledger row timed by the database clock, so tests count overlaps."""

from __future__ import annotations

import os
import time

from django.db import connection

from django_jobretry import current_job, job
from tests.jobs_app.models import LedgerRun

LEDGER = LedgerRun._meta.db_table


def _ledger(key: str, seconds: float) -> None:
    context = current_job()
    job_id = context.job_id if context else 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {LEDGER} (key, job_id, pid, started_at) VALUES (%s, %s, %s, clock_timestamp()) "
            "RETURNING id",
            [key, job_id, os.getpid()],
        )
        row_id = cursor.fetchone()[0]
    time.sleep(seconds)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {LEDGER} SET ended_at = clock_timestamp() WHERE id = %s", [row_id])


@job(policy="three", concurrency=3)
def three_at_once(key: str, seconds: float) -> None:
    _ledger(key, seconds)


@job(policy="three", concurrency=1, concurrency_key="tenant:{tenant}")
def one_per_tenant(tenant: int, seconds: float) -> None:
    _ledger(f"tenant-{tenant}", seconds)


@job(policy="three", rate="60/s")
def sixty_a_second(key: str) -> None:
    _ledger(key, 0)


@job(concurrency=10)
def limited_noop() -> None:
    """bench/limits.py: a global limit that every claim checks and none reaches at --concurrency 10."""


@job(concurrency=1, concurrency_key="key:{key}")
def keyed_noop(key: int) -> None:
    """bench/limits.py: one lane per key."""
