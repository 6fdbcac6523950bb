"""Bringing scheduled jobs forward, for ``django_jobretry.testing.run_jobs(include_scheduled=True)``.

A test must not sleep through a backoff, and the database clock cannot be
moved. So the next scheduled jobs are moved to now instead. That is a write
of job state, so it lives with the other writes in the services layer
(docs/design.md#layers) and uses the database clock (docs/design.md#rule-5).
Only ``run_at`` of ready rows changes: attempts, history and everything a
worker's transitions fence on stay as they were.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.db import connection

from django_jobretry.holds.sql import not_held
from django_jobretry.services.sql import JOB

logger = logging.getLogger("django_jobretry")


def _waiting(alias: str, *, queues: bool, tasks: bool) -> str:
    """The condition "ready, scheduled later, may still run, not held" (and in the filters) on ``alias``."""
    return (
        f"{alias}.status = 'ready' AND {alias}.run_at > statement_timestamp() "
        f"AND {alias}.attempts < {alias}.max_attempts {not_held(alias)}"
        + (f" AND {alias}.queue_name = ANY(%(queues)s)" if queues else "")
        + (f" AND {alias}.task_name = ANY(%(tasks)s)" if tasks else "")
    )


def bring_forward_next(
    *, queues: Sequence[str] | None = None, task_names: Sequence[str] | None = None
) -> list[int]:
    """Make the ready jobs with the earliest future ``run_at`` due now; returns their ids.

    Only the earliest (ties included) move, so that running them one group
    at a time keeps the order the schedule had - as if the clock jumped to
    the next scheduled time. ``queues`` and ``task_names`` limit which jobs
    are considered.
    """
    where = {"queues": bool(queues), "tasks": bool(task_names)}
    sql = f"""
        UPDATE {JOB} AS j SET run_at = statement_timestamp()
        FROM (SELECT min(w.run_at) AS at FROM {JOB} AS w WHERE {_waiting("w", **where)}) AS next
        WHERE {_waiting("j", **where)} AND j.run_at = next.at
        RETURNING j.id
    """
    params: dict[str, Any] = {"queues": list(queues or []), "tasks": list(task_names or [])}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        ids = sorted(row[0] for row in cursor.fetchall())
    if ids:
        logger.info(
            "%d scheduled job(s) brought forward to now",
            len(ids),
            extra={"job_ids": ids, "outcome": "brought_forward"},
        )
    return ids
