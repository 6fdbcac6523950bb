"""What PostgreSQL can take from Python: instants the tables hold, and text and JSON checked before any query.

A ``timestamptz`` column accepts far more than Python's ``datetime``:
'infinity', '-infinity', years up to 294276, which psycopg refuses to load
(``DataError: timestamp too large``, the whole row with it). So every
timestamp column carries a CHECK constraint (:func:`holdable_times`) to
these two instants: a day inside years 1 to 9999, so that showing them in
any time zone cannot overflow either. Readers then load times as they are.
Enqueue and requeue check a ``run_after`` first (:func:`check_run_after`),
so a caller hears which value is wrong rather than the constraint's name.

An enqueue checks much more (validation.py: every argument must come back
from jsonb unchanged). A value typed into a search, a form or a command
line only has to be one PostgreSQL accepts (:func:`is_text`,
:func:`check_json`), or the statement fails with a ``DataError`` or an
encoding error - a server error, or a traceback - instead of the clear
refusal every other bad input gets: no NUL character and no lone surrogate
(what a name that is not UTF-8 becomes on a command line) in a string or
key, no NaN or infinity (``json.loads`` reads ``NaN`` and ``1e400``), and no
nesting deeper than a limit (Django's lookups recurse into nested lists).
Iterative, so the check cannot itself recurse.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import CheckConstraint, Q
from django.utils import timezone

from django_jobretry.exceptions import InvalidJob
from django_jobretry.validation import check_text

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


def is_text(text: str) -> bool:
    """Whether PostgreSQL can take ``text``: no NUL, no lone surrogate (what argv that is not UTF-8 holds)."""
    try:
        check_text("text", text)
    except InvalidJob:
        return False
    return True


def check_json(subject: str, value: Any, *, max_depth: int) -> None:
    """Refuse ``value`` (as ``json.loads`` returns it) if jsonb would; InvalidJob names ``subject``.

    Depth counts as in validation.py: ``value`` is level 1, and a non-empty
    list or object at level ``max_depth`` is one level too deep.
    """
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if item and depth >= max_depth:
                raise InvalidJob(f"{subject} is nested deeper than {max_depth} levels")
            if isinstance(item, dict):
                for key in item:
                    check_text(f"a key in {subject}", str(key))
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidJob(f"{subject} holds {item!r}: PostgreSQL's jsonb has no NaN or infinity")
        elif isinstance(item, str):
            check_text(subject, item)
