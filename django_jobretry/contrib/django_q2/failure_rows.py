"""django-q2's Failure rows, read for the import without trusting them: pages, pickles, function paths.

A ``Failure`` row is not signed: anyone who can write django-q2's table
decides what it holds. So everything the import reads of one is read here,
each part by the rule that keeps a forged row harmless. The import itself
(a row mapped to a dead letter, and recorded) is :mod:`.importer`.

**Reading** (:func:`pages`). Three things the import must not do while
reading (docs/django-q2.md):

- let django-q2's ``PickledObjectField`` unpickle ``args``, ``kwargs`` or
  ``result``: those pickles are not signed, and loading one can run code.
  The columns are read as text (a ``Cast`` to ``TextField`` has no
  ``from_db_value``), and :func:`plain_data` loads them as plain data only;
- fail on a time Python cannot hold: ``timestamptz`` takes 'infinity' and
  years past 9999, which psycopg refuses to load, the whole page with it.
  ``started`` and ``stopped`` are read as None unless within what a dead
  letter holds (models/instants.py), with their text beside them
  (``text_started``, ``text_stopped``) for the reason the row is skipped;
- hold the whole table in memory: a page holds at most ``PAGE_ROWS`` rows
  and ``PAGE_BYTES`` of column text (one row alone when it is bigger),
  planned from the columns' lengths before their text is fetched. The
  import's memory then follows the page, not the table.

**Pickles** (:func:`plain_data`). django-q2 signs the packages in its
queue, but it stores a finished task's arguments and result in its
``Task`` table as bare pickles (picklefield: base64 text). They are loaded
with an unpickler that resolves only the plain value types below and
refuses every other global (a class, a function such as ``os.system``).
Nothing else in a pickle can call code.

Allowed, besides what pickle builds without any global (None, bool, int,
float, str, bytes, bytearray, list, tuple, dict, set, frozenset):
``complex``, ``datetime``'s ``datetime``, ``date``, ``time``, ``timedelta``
and ``timezone``, ``zoneinfo.ZoneInfo`` (by key), ``decimal.Decimal`` and
``uuid.UUID``: the values django-q2 users put in task arguments. A constructor
that could allocate from a number (``bytearray(10**12)``) takes bytes only,
so memory stays in proportion to the pickle, and the loaded value is checked
to hold only instances of these types (a pickle can also name a class or
function as a value). django-q2 writes protocol
5; 3 and 4 load too (protocol 2 spells bytes, and so dates, with
``_codecs.encode``: refused).

**Function paths** (:func:`refusal`). A live django-q2 task is replayed
from the package django-q2 signed when ``async_task`` was called: its
function path was chosen by the project's code. A row can name any
function (``os.system``), and the import signs what it turns into a dead
letter, which a requeue then hands to the cluster. So before signing, the
import checks that the path names a task function of the project:

1. a dotted path of plain identifiers, ``module.function``;
2. whose module belongs to one of the project's installed apps, other
   than Django's, django-q2's and this package's own (``django.``,
   ``django_q``, ``django_jobretry``): the string is checked before
   anything is imported, so a row cannot make the import load an arbitrary
   module;
3. which imports, and whose attribute is a plain Python function defined
   in that module (``__module__`` and ``__qualname__`` match): not a
   builtin (``os.system``), a class, a method, or a function re-exported
   from elsewhere (``from shutil import rmtree``).

The same rule applies to the task's ``hook``, which django-q2 calls with
the finished task.
"""

from __future__ import annotations

import binascii
import datetime
import decimal
import importlib
import inspect
import io
import pickle
import re
import uuid
import zoneinfo
from base64 import b64decode
from collections.abc import Iterator
from typing import Any

from django.apps import apps
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


def selection(*, since: datetime.datetime | None, func: str | None) -> Any:
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


#: The types a loaded value may be made of.
PLAIN_TYPES = (
    type(None), bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset,
    datetime.date, datetime.time, datetime.timedelta, datetime.tzinfo, decimal.Decimal, uuid.UUID,
)  # fmt: skip

#: Every global a plain-data pickle may name: (module, name) -> the object it is.
ALLOWED: dict[tuple[str, str], Any] = {
    ("builtins", "complex"): complex,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("datetime", "datetime"): datetime.datetime,
    ("datetime", "date"): datetime.date,
    ("datetime", "time"): datetime.time,
    ("datetime", "timedelta"): datetime.timedelta,
    ("datetime", "timezone"): datetime.timezone,
    ("decimal", "Decimal"): decimal.Decimal,
    ("uuid", "UUID"): uuid.UUID,
    ("zoneinfo", "ZoneInfo"): zoneinfo.ZoneInfo,
}


class NotPlainData(Exception):
    """The pickle is not plain data, or not a pickle; the message says which and why."""


def _zone_attribute(owner: object, name: str) -> Any:
    """The one ``getattr`` a pickle of a ZoneInfo needs (``ZoneInfo._unpickle``); any other is refused."""
    if owner is zoneinfo.ZoneInfo and name == "_unpickle":
        return zoneinfo.ZoneInfo._unpickle  # type: ignore[attr-defined]
    raise NotPlainData("it looks up an attribute, which plain data never does")


def _bytearray(data: object = b"") -> bytearray:
    """Protocols 3 and 4 build a bytearray from bytes; from a number it would allocate that many."""
    if not isinstance(data, bytes):
        raise NotPlainData("it builds a bytearray from something other than bytes")
    return bytearray(data)


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("builtins", "getattr"):
            return _zone_attribute
        if (module, name) == ("builtins", "bytearray"):
            return _bytearray
        found = ALLOWED.get((module, name))
        if found is None:
            shown = f"{module}.{name}"[:120].encode("unicode_escape").decode("ascii")  # no terminal codes
            raise NotPlainData(f"it refers to {shown}, which is not plain data")
        return found

    def persistent_load(self, pid: object) -> Any:
        raise NotPlainData("it refers to an outside object (a persistent id)")


def plain_data(text: str | None) -> Any:
    """The value a picklefield column's ``text`` holds, if it is plain data; NotPlainData if not."""
    if text is None:
        return None
    try:
        raw = b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error) as exc:
        raise NotPlainData("it is not a pickle django-q2 wrote (not base64)") from exc
    try:
        value = _PlainUnpickler(io.BytesIO(raw)).load()
    except NotPlainData:
        raise
    except Exception as exc:  # truncated, corrupt, or a value an allowed type refuses to build
        raise NotPlainData(f"it is not a readable pickle of plain data ({type(exc).__name__})") from exc
    _only_plain(value)
    return value


def _only_plain(value: object) -> None:
    """NotPlainData unless ``value`` and everything it contains is an instance of PLAIN_TYPES."""
    seen: set[int] = set()
    pending = [value]
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if not isinstance(item, PLAIN_TYPES):
            raise NotPlainData(f"it holds a {type(item).__qualname__}, which is not plain data")
        if isinstance(item, dict):
            pending += item.keys()
            pending += item.values()
        elif isinstance(item, list | tuple | set | frozenset):
            pending += item


#: ``module.function``: ASCII identifiers separated by dots, at least one dot.
DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
#: Packages whose functions are never a project's task to replay (they run commands, send mail...).
NOT_PROJECT = ("django", "django_q", "django_jobretry")


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def project_app(module: str) -> str | None:
    """The installed app (its package) ``module`` belongs to; None when it is none of the project's."""
    if any(_inside(module, package) for package in NOT_PROJECT):
        return None
    return next((app.name for app in apps.get_app_configs() if _inside(module, app.name)), None)


def refusal(path: str, what: str = "function") -> str | None:
    """Why ``path`` is not a task function of this project that may be signed; None when it is."""
    if not DOTTED.fullmatch(path):
        return f"its {what} {path[:100]!r} is not a dotted path of a module-level function"
    module, _, name = path.rpartition(".")
    if project_app(module) is None:
        return (
            f"its {what} {path!r} is not in one of the project's installed apps (Django's, django-q2's "
            "and django-jobretry's own functions do not count): only those are signed for replay"
        )
    try:
        found = getattr(importlib.import_module(module), name, None)
    except Exception as exc:  # the project's own module: it may raise anything on import here
        return f"its {what} {path!r} cannot be imported here ({type(exc).__name__})"
    if not inspect.isfunction(found) or (found.__module__, found.__qualname__) != (module, name):
        return f"its {what} {path!r} is not a function defined in {module}"
    return None
