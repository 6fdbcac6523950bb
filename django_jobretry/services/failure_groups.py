"""Failure groups: the dead letters that failed the same way, counted from one index.

An operator after an outage reads problems, not rows: per fingerprint
(models/fingerprints.py) how many dead letters, first and last seen, which
tasks and reasons, and one example message. The count comes from the
(fingerprint, task_name, reason, dead_at) index alone: an index-only scan
already in group order, grouped twice (per task and reason, then per
fingerprint), with no sort of the rows and no visit to the table. The
example of a group is one index lookup: the newest dead letter of its
(last, in name order) task and reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

from django_jobretry.models import DeadLetter

__all__ = ["FailureGroup", "groups"]

#: Most groups one call returns: a page an operator reads, not an export.
MAX_GROUPS = 500
_TABLE = DeadLetter._meta.db_table


@dataclass(frozen=True)
class FailureGroup:
    """One fingerprint's dead letters: ``count`` of them, dead from ``first_seen`` to ``last_seen``."""

    fingerprint: str
    count: int
    first_seen: datetime
    last_seen: datetime
    tasks: list[str]
    reasons: list[str]
    example_class: str
    example_message: str


def groups(*, since: timedelta | datetime | None = None, limit: int = 50) -> list[FailureGroup]:
    """The largest failure groups, biggest first (then the most recently seen); ``since`` as filtered()'s.

    ``since`` is a time, or how far back from the database's now: the
    dashboard's "last 24 hours". ``limit``: from 1 to MAX_GROUPS.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_GROUPS:
        raise ValueError(f"limit {limit!r} is invalid: an integer from 1 to {MAX_GROUPS}")
    sql, params = query(since=since, limit=limit)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [FailureGroup(*row) for row in cursor.fetchall()]


def query(*, since: timedelta | datetime | None, limit: int) -> tuple[str, list[Any]]:
    """The one statement of groups(), and its parameters (EXPLAINed by the tests)."""
    where, params = _since(since)
    sql = f"""
        WITH parts AS (
            SELECT fingerprint, task_name, reason, count(*) AS n,
                   min(dead_at) AS first_seen, max(dead_at) AS last_seen
            FROM {_TABLE} {where}
            GROUP BY fingerprint, task_name, reason
        ), grouped AS (
            SELECT fingerprint, sum(n)::bigint AS n, min(first_seen) AS first_seen,
                   max(last_seen) AS last_seen,
                   array_agg(DISTINCT task_name ORDER BY task_name) AS tasks,
                   array_agg(DISTINCT reason ORDER BY reason) AS reasons
            FROM parts GROUP BY fingerprint
            ORDER BY n DESC, last_seen DESC, fingerprint LIMIT %s
        )
        SELECT g.fingerprint, g.n, g.first_seen, g.last_seen, g.tasks, g.reasons,
               e.last_error_class, e.last_error
        FROM grouped AS g
        CROSS JOIN LATERAL (
            SELECT last_error_class, last_error FROM {_TABLE} AS d
            WHERE d.fingerprint = g.fingerprint
            ORDER BY d.task_name DESC, d.reason DESC, d.dead_at DESC LIMIT 1
        ) AS e
        ORDER BY g.n DESC, g.last_seen DESC, g.fingerprint
    """
    return sql, [*params, limit]


def _since(since: timedelta | datetime | None) -> tuple[str, list[Any]]:
    if since is None:
        return "", []
    if isinstance(since, timedelta):
        return "WHERE dead_at >= statement_timestamp() - %s", [since]
    if isinstance(since, datetime):
        if since.tzinfo is None or since.utcoffset() is None:
            raise ValueError(f"since {since.isoformat()!r} is invalid: a datetime with a time zone")
        return "WHERE dead_at >= %s", [since]
    raise ValueError(f"since {since!r} is invalid: a datetime or a timedelta")
