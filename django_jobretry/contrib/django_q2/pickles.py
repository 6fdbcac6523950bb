"""django-q2's unsigned pickles (a Failure row's ``args``, ``kwargs``, ``result``), read as plain data only.

django-q2 signs the packages in its queue, but it stores a finished task's
arguments and result in its ``Task`` table as bare pickles (picklefield:
base64 text). Anyone who can write that table can put a pickle there that
runs code when loaded, so the import never lets the field unpickle them: it
reads the column's text and loads it here, with an unpickler that resolves
only the plain value types below and refuses every other global (a class, a
function such as ``os.system``). Nothing else in a pickle can call code.

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
"""

from __future__ import annotations

import binascii
import datetime
import decimal
import io
import pickle
import uuid
import zoneinfo
from base64 import b64decode
from typing import Any

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
