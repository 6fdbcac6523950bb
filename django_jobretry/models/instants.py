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

from datetime import UTC, datetime, timedelta

from django.db.models import Case, DateTimeField, F, Q, When
from django.utils import timezone

from django_jobretry.exceptions import InvalidJob

#: The earliest and latest instants any reader loads as a datetime, and enqueue accepts as a run_at.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)


def holdable(name: str) -> Q:
    """Rows whose ``name`` Python can hold (NULLs and out-of-range values excluded)."""
    return Q(**{f"{name}__gte": EARLIEST, f"{name}__lte": LATEST})


def held(name: str) -> Case:
    """Column ``name`` where Python can hold its time, else NULL."""
    return Case(When(holdable(name), then=F(name)), output_field=DateTimeField())


def check_run_after(run_after: datetime | timedelta | None) -> None:
    """Refuse a ``run_after`` (a time, or a delay from now) that leaves EARLIEST..LATEST.

    Checked where the value enters (enqueue, requeue), before any statement:
    PostgreSQL would store ``datetime.max`` west of UTC or ``timedelta.max``,
    and then no Python process could load the row back (DataError), while
    the row stayed in the caller's transaction. The day to spare also covers
    a database clock a little off this one: it adds a delay to its own.
    """
    if run_after is None:
        return
    try:
        when = timezone.now() + run_after if isinstance(run_after, timedelta) else run_after.astimezone(UTC)
    except OverflowError:  # past datetime's own range
        when = None
    if when is None or not EARLIEST <= when <= LATEST:
        given = "now plus this delay" if isinstance(run_after, timedelta) else "this time"
        raise InvalidJob(
            f"run_after {run_after!r} is out of range: {given} must be from "
            f"{EARLIEST.date().isoformat()} to {LATEST.date().isoformat()} UTC"
        )
