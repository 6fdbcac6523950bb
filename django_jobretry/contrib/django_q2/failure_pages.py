"""Reading django-q2's tables for the import: raw column text, in pages bounded by bytes.

Two things the import must not do while reading (docs/django-q2.md):

- let django-q2's ``PickledObjectField`` unpickle ``args``, ``kwargs`` or
  ``result``: those pickles are not signed, and loading one can run code.
  The columns are read as text (a ``Cast`` to ``TextField`` has no
  ``from_db_value``), and :mod:`.pickles` loads them as plain data only;
- fail on a time Python cannot hold: ``timestamptz`` takes 'infinity' and
  years past 9999, which psycopg refuses to load, the whole page with it.
  ``started`` and ``stopped`` are read as None unless within what a dead
  letter holds (models/instants.py), with their text beside them
  (``text_started``, ``text_stopped``) for the reason the row is skipped;
- hold the whole table in memory: a page holds at most ``PAGE_ROWS`` rows
  and ``PAGE_BYTES`` of column text (one row alone when it is bigger),
  planned from the columns' lengths before their text is fetched. The
  import's memory then follows the page, not the table.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db.models import Case, DateTimeField, F, IntegerField, Q, TextField, Value, When
from django.db.models.functions import Cast, Coalesce, Length

from django_jobretry.models.instants import EARLIEST, LATEST

#: Failure rows per page (and per transaction): the unit of progress and of Ctrl-C loss.
PAGE_ROWS = 500
#: Column text (base64 pickles, queue payloads) per page; a bigger row is a page of its own.
PAGE_BYTES = 4 * 1024 * 1024
#: The Failure columns read: the pickled ones as their raw text.
PICKLED = ("args", "kwargs", "result")
PLAIN = ("id", "name", "func", "hook", "group", "cluster", "attempt_count")
#: The Failure columns read as times only when a dead letter can hold them, else as None.
TIMES = ("started", "stopped")


def selection(*, since: datetime | None, func: str | None) -> Any:
    """django-q2's failures, oldest id first (a stable keyset order while rows change)."""
    from django_q.models import Failure

    failures = Failure.objects.all()
    if since is not None:
        failures = failures.filter(stopped__gt=since)
    if func is not None:
        failures = failures.filter(func=func)
    return failures.order_by("pk")


def _length(*columns: str) -> Any:
    total: Any = Value(0)
    for column in columns:
        total = total + Coalesce(Length(Cast(column, TextField())), Value(0))
    return Cast(total, IntegerField())


def _first_page(sizes: list[tuple[Any, int]]) -> list[Any]:
    """The keys of the longest prefix of ``sizes`` within PAGE_BYTES (at least one)."""
    keys: list[Any] = []
    total = 0
    for key, size in sizes:
        if keys and total + size > PAGE_BYTES:
            break
        keys.append(key)
        total += size
    return keys


def _held(column: str) -> Case:
    """The time in ``column`` when a dead letter can hold it; NULL otherwise (never sent to Python)."""
    within = Q(**{f"{column}__gte": EARLIEST, f"{column}__lte": LATEST})
    return Case(When(within, then=F(column)), default=None, output_field=DateTimeField())


def _with_times(row: dict[str, Any]) -> dict[str, Any]:
    for column in TIMES:
        row[column] = row.pop(f"held_{column}")
    return row


def pages(failures: Any) -> Iterator[list[dict[str, Any]]]:
    """The selected failures a page at a time: PLAIN values, TIMES (and their text), raw PICKLED text."""
    raw: dict[str, Any] = {f"raw_{column}": Cast(column, TextField()) for column in PICKLED}
    for column in TIMES:
        raw |= {f"held_{column}": _held(column), f"text_{column}": Cast(column, TextField())}
    last = None
    while True:
        after = failures if last is None else failures.filter(pk__gt=last)
        sizes = list(after.annotate(size=_length(*PICKLED)).values_list("pk", "size")[:PAGE_ROWS])
        if not sizes:
            return
        keys = _first_page(sizes)
        page = [_with_times(row) for row in failures.filter(pk__in=keys).annotate(**raw).values(*PLAIN, *raw)]
        yield page
        last = keys[-1]


class QueueWatch:
    """Task ids in django-q2's ORM queue now; each row's package is decoded once."""

    def __init__(self) -> None:
        self._ids: dict[int, str | None] = {}

    def current(self) -> set[str]:
        from django_q.conf import Conf
        from django_q.models import OrmQ
        from django_q.signing import SignedPackage

        rows = OrmQ.objects.using(Conf.ORM or "default")
        queued = list(rows.annotate(size=_length("payload")).values_list("pk", "size").order_by("pk"))
        new = [(pk, size) for pk, size in queued if pk not in self._ids]
        while new:
            keys = _first_page(new)
            new = new[len(keys) :]
            for pk, payload in rows.filter(pk__in=keys).values_list("pk", "payload"):
                try:  # signed by django-q2: checked before it is unpickled
                    self._ids[pk] = str(SignedPackage.loads(payload)["id"])
                except Exception:  # another SECRET_KEY, or garbage: django-q2 cannot run it either
                    self._ids[pk] = None
        return {task_id for pk, _ in queued if (task_id := self._ids.get(pk))}
