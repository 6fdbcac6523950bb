"""The tasks bench/django_q2.py sends through django-q2; the cluster locates them by dotted path."""

from __future__ import annotations

#: Runs of each fail-twice task, by task number; bench/django_q2.py creates and drops it.
COUNTER = "jobretry_bench_q2_runs"


def noop(number: int) -> None:
    """The success workload: nothing."""


def fail_twice(number: int) -> str:
    """Fails in its first two runs, then succeeds; counts its runs in COUNTER (one statement)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {COUNTER} (task, runs) VALUES (%s, 1) "  # noqa: S608 - a constant
            f"ON CONFLICT (task) DO UPDATE SET runs = {COUNTER}.runs + 1 RETURNING runs",
            [number],
        )
        row = cursor.fetchone()
    runs = int(row[0]) if row else 0
    if runs <= 2:
        raise ConnectionError(f"run {runs} of task {number} fails on purpose")
    return "ok"
