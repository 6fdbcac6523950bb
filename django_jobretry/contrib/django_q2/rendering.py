"""The display JSON of a django-q2 task's arguments: total, bounded, and valid for PostgreSQL.

A dead letter from django-q2 shows the task's ``args`` and ``kwargs`` as
JSON (docs/django-q2.md). They are user values: a ``__repr__`` may raise, a
string may hold a lone surrogate (a file name decoded with
``surrogateescape``) or NUL, a list may contain itself, nest thousands deep
or hold a million items. Burying the task must not fail on any of them: a
burial that raises rolls back, the queue row is redelivered, and the task
loops forever. So :func:`json_safe` is the one converter on that path (the
monitor's burial and the import), and cannot raise for any value:

- JSON values stay themselves; every other value becomes its ``repr``,
  itself bounded (:mod:`reprlib`), or a placeholder naming its type when
  even that raises;
- text is made valid for PostgreSQL here, before it reaches a query: NUL
  becomes ``\\0`` and a lone surrogate its ``\\udcxx`` escape, so no invalid
  text is sent (whose error would quote the argument into the server log);
- NaN and infinities (not JSON) become their repr; huge integers a note of
  their size;
- cycles, depth, items and characters are bounded per rendering
  (``MAX_DEPTH``, ``MAX_NODES``, ``MAX_CHARS``); what is cut is marked.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

Container = list[Any] | tuple[Any, ...] | dict[Any, Any]

#: Containers nested deeper than this are shown as a placeholder.
MAX_DEPTH = 32
#: Values visited per rendering; the rest of a container is counted, not shown.
MAX_NODES = 10_000
#: Characters of text per rendering (strings, keys and reprs together).
MAX_CHARS = 64 * 1024
#: Integers wider than this many bits are shown as a note of their size (str() of them is costly).
MAX_INT_BITS = 1024

_REPR = reprlib.Repr(
    maxlevel=4, maxtuple=20, maxlist=20, maxarray=20, maxdict=20, maxset=20, maxfrozenset=20,
    maxdeque=20, maxstring=200, maxlong=200, maxother=500,
)  # fmt: skip


def escaped(text: str) -> str:
    """``text`` as PostgreSQL accepts it: NUL as ``\\0``, lone surrogates as ``\\udcxx``."""
    return text.replace("\x00", "\\0").encode("utf-8", "backslashreplace").decode("utf-8")


def type_name(value: object) -> str:
    """The name of ``value``'s type; a placeholder when even that raises (a hostile metaclass)."""
    try:
        return escaped(str.__str__(type.__getattribute__(type(value), "__qualname__")))
    except Exception:
        return "object"


def shown_repr(value: object, limit: int = MAX_CHARS) -> str:
    """``repr(value)``, bounded and escaped; ``<unrepresentable T>`` when it raises."""
    if isinstance(value, bytes | bytearray):  # repr() of a huge one would be built whole first
        value = bytes(memoryview(value)[:limit])
    try:
        text = str.__str__(_REPR.repr(value))
    except KeyboardInterrupt:
        raise
    except BaseException:  # user code: even SystemExit must not stop a burial
        return f"<unrepresentable {type_name(value)}>"
    return escaped(text[:limit])


class _Rendering:
    """One call of json_safe: the budget it has left."""

    def __init__(self) -> None:
        self.nodes = 0
        self.chars = 0

    def text(self, value: str) -> str:
        room = max(MAX_CHARS - self.chars, 0)
        shown = escaped(value[:room])[:room]
        if len(value) > room:
            shown += f"... [{len(value) - room} characters cut]"
        self.chars += len(shown)
        return shown

    def key(self, value: object) -> str:
        if isinstance(value, str):
            return self.text(str.__str__(value))
        if value is None or value is True or value is False:
            return {None: "null", True: "true", False: "false"}[value]  # as json.dumps says them
        if isinstance(value, int | float):
            return str(self.value(value, 0, set()))  # 1 -> "1", as json.dumps says it
        return self.text(shown_repr(value, max(MAX_CHARS - self.chars, 0)))

    def value(self, value: object, depth: int, path: set[int]) -> Any:
        self.nodes += 1
        if value is None or value is True or value is False:
            return value
        if isinstance(value, int):
            number = int.__index__(value)
            return number if number.bit_length() <= MAX_INT_BITS else f"<int of {number.bit_length()} bits>"
        if isinstance(value, float):
            real = float.__float__(value)
            return real if math.isfinite(real) else repr(real)
        if isinstance(value, str):
            return self.text(str.__str__(value))
        if isinstance(value, list | tuple | dict):
            return self.container(value, depth, path)
        return self.text(shown_repr(value, max(MAX_CHARS - self.chars, 0)))

    def container(self, value: Container, depth: int, path: set[int]) -> Any:
        if id(value) in path:
            return f"<cycle: this {type_name(value)} contains itself>"
        if depth >= MAX_DEPTH:
            return f"<{type_name(value)} nested deeper than {MAX_DEPTH}>"
        path.add(id(value))
        try:
            if isinstance(value, dict):
                size, items = dict.__len__(value), dict.items(value)
                shown: dict[str, Any] = {}
                for key, item in items:
                    if self.spent():
                        shown["..."] = f"{size - len(shown)} more items not shown"
                        break
                    shown[self.key(key)] = self.value(item, depth + 1, path)
                return shown
            # The base type's own methods: a subclass's __iter__ or __len__ is user code.
            if isinstance(value, list):
                size, members = list.__len__(value), list.__iter__(value)
            else:
                size, members = tuple.__len__(value), tuple.__iter__(value)
            listed: list[Any] = []
            for item in members:
                if self.spent():
                    listed.append(f"... {size - len(listed)} more items not shown")
                    break
                listed.append(self.value(item, depth + 1, path))
            return listed
        finally:
            path.discard(id(value))

    def spent(self) -> bool:
        return self.nodes >= MAX_NODES or self.chars >= MAX_CHARS


def json_safe(value: object) -> Any:
    """A JSON value for display that PostgreSQL stores as it is, for any ``value``; never raises."""
    try:
        return _Rendering().value(value, 0, set())
    except KeyboardInterrupt:
        raise
    except BaseException:  # e.g. a dict changed by another thread while it is read
        return f"<unrepresentable {type_name(value)}>"


def arguments(args: object, kwargs: object) -> tuple[list[Any], dict[str, Any]]:
    """The display JSON of a task's ``args`` (a list) and ``kwargs`` (a dict), whatever they hold."""
    shown_args = json_safe(() if args is None else args)
    shown_kwargs = json_safe({} if kwargs is None else kwargs)
    return (
        shown_args if isinstance(shown_args, list) else [shown_args],
        shown_kwargs if isinstance(shown_kwargs, dict) else {"kwargs": shown_kwargs},
    )
