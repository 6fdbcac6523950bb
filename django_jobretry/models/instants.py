"""The instants Python can hold: what the tables accept, and what enqueue and requeue accept.

A ``timestamptz`` column accepts far more than Python's ``datetime``:
'infinity', '-infinity', years up to 294276, which psycopg refuses to load
(``DataError: timestamp too large``, the whole row with it). So every
timestamp column carries a CHECK constraint (:func:`holdable_times`) to
these two instants: a day inside years 1 to 9999, so that showing them in
any time zone cannot overflow either. Readers then load times as they are.
Enqueue and requeue check a ``run_after`` first (:func:`check_run_after`),
so a caller hears which value is wrong rather than the constraint's name.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db.models import CheckConstraint, Q
from django.utils import timezone

from django_jobretry.exceptions import InvalidJob

#: The earliest and latest instants a timestamp column holds, and enqueue accepts as a run_at.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)


def holdable_times(table: str, *names: str) -> list[CheckConstraint]:
    """One CHECK per column in ``names``: NULL or within EARLIEST..LATEST, named ``<table>_<name>_holdable``.

    Added NOT VALID and validated in a second migration (docs/install.md#upgrading-big-tables).
    """
    return [
        CheckConstraint(
            condition=Q(**{f"{name}__gte": EARLIEST, f"{name}__lte": LATEST}), name=f"{table}_{name}_holdable"
        )
        for name in names
    ]


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
