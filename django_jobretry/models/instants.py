"""The instants Python can hold, and reading a timestamp only when it can.

A ``timestamptz`` column accepts far more than Python's ``datetime``:
'infinity', '-infinity', years up to 294276. Nothing this package writes
leaves Python's range (enqueue refuses such a ``run_after``), but a
hand-written UPDATE or a restore can, and psycopg refuses to load the whole
row (``DataError: timestamp too large``). Every reader that must stay total
(the admin, the workers table, task results) bounds its times by these two
instants: a day inside years 1 to 9999, so that showing them in any time
zone cannot overflow either.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db.models import Case, DateTimeField, F, Q, When

#: The earliest and latest instants any reader loads as a datetime, and enqueue accepts as a run_at.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)


def holdable(name: str) -> Q:
    """Rows whose ``name`` Python can hold (NULLs and out-of-range values excluded)."""
    return Q(**{f"{name}__gte": EARLIEST, f"{name}__lte": LATEST})


def held(name: str) -> Case:
    """Column ``name`` where Python can hold its time, else NULL."""
    return Case(When(holdable(name), then=F(name)), output_field=DateTimeField())
