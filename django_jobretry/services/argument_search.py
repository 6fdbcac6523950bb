"""Search by arguments: "the dead letters of customer 42", read from a line of text into a query.

Used by the admin's sidebar search (admin/argument_search.py) and by
``deadletters list --arg`` (management/). Answered by jsonb containment
(``@>``) on the GIN indexes of ``args`` and ``kwargs`` (migration 0023;
on jobs, partial indexes over retrying jobs only). Containment compares
whole values: a search finds ``customer_id=42`` or ``email="a@b"``, never a
part of a text (no index serves a substring of jsonb). What one may type:

- ``customer_id=42``: the argument of that parameter, its value read as
  JSON when it is (``42``, ``true``, ``"42"``, ``{"id": 1}``), else as text
  (``'eu west'`` in single quotes is the text inside); a number also
  matches the same digits stored as a string. A row stores a call's
  keyword arguments by name and its positional ones by index, so the name
  is looked for both ways: in ``kwargs``, and, for every registered task
  whose function takes a parameter of that name by position, at that
  index of ``args`` (still through the args index: ``args @> [value]``,
  then the index is checked). A dotted name looks inside: ``order.id=7``
  is ``{"order": {"id": 7}}``. Several terms, space separated (quote a
  value with spaces), must all match.
- a bare value, ``42`` or ``"abc"``: a positional argument, at any index.
- a JSON object or array: ``{"customer_id": 42, "region": "eu"}`` matches
  keyword arguments containing it, ``[42]`` positional ones.

Anything that cannot be read, or that PostgreSQL's jsonb would refuse (an
escaped NUL or lone surrogate, NaN or an infinity, more than MAX_DEPTH
levels), is :class:`InvalidSearch`, with a message saying what is wrong,
before any query.
"""

from __future__ import annotations

import inspect
import json
import shlex
from collections.abc import Callable
from typing import Any

from django.db.models import Q

from django_jobretry.exceptions import InvalidJob
from django_jobretry.models.storable import check_json
from django_jobretry.registry import registry
from django_jobretry.signatures import call_signature

#: Longest search accepted, in characters: a search, not a payload.
MAX_CHARS = 1000
#: Deepest value a search may hold, in levels (a keyword's dotted name counts): deeper than any
#: argument an enqueue accepts (MAX_ARGS_DEPTH), and far from Django's recursion over nested lists.
MAX_DEPTH = 100
EXAMPLE = 'customer_id=42, order.id=7 region=eu, 42, or {"customer_id": 42}'
#: What a search compares, in the words of the admin's field and the command's help.
WHOLE_VALUES = "a whole value, never part of a text; name=… also finds it passed by position"
_BY_POSITION = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class InvalidSearch(ValueError):
    """A search that cannot be read; the message says which part and what is allowed."""


def containment(text: str) -> Q:
    """The Q of an argument search (see the module's docstring), or InvalidSearch."""
    text = text.strip()
    if not text:
        raise InvalidSearch(f"the argument search is empty: type e.g. {EXAMPLE}")
    if len(text) > MAX_CHARS or "\x00" in text:
        raise InvalidSearch(f"the argument search is longer than {MAX_CHARS} characters, or holds a NUL")
    if text[0] in "{[":
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise InvalidSearch(f"the argument search {text[:60]!r} is not valid JSON: {exc}") from None
        _check(value)
        return Q(**{f"{'kwargs' if isinstance(value, dict) else 'args'}__contains": value})
    try:
        terms = shlex.split(text, posix=False)  # keeps '"42"' (a JSON string) apart from 42
    except ValueError as exc:
        raise InvalidSearch(f"the argument search {text[:60]!r} cannot be read: {exc}") from None
    found = Q()
    for term in terms:
        found &= _term(term)
    return found


def _term(term: str) -> Q:
    name, equals, raw = term.partition("=")
    if not equals:
        return _either(raw=name, build=lambda value: _checked(Q(args__contains=[value]), value))
    path = name.split(".")
    if not all(part.strip() for part in path):
        raise InvalidSearch(f"{term!r}: a name before '=' (e.g. {EXAMPLE})")
    if not raw:
        raise InvalidSearch(f"{term!r}: a value after '=' (e.g. customer_id=42)")
    positions = parameter_positions(path[0])

    def named(value: Any) -> Q:
        for part in reversed(path[1:]):
            value = {part: value}
        found = _checked(Q(kwargs__contains={path[0]: value}), {path[0]: value})
        for index, tasks in positions.items():
            found |= (
                Q(task_name__in=tasks)
                & Q(args__contains=[value])  # what the args index answers
                & Q(**{f"args__{index}__contains": value})  # at the parameter's own index
            )
        return found

    return _either(raw=raw, build=named)


def parameter_positions(name: str) -> dict[int, list[str]]:
    """Index -> the registered tasks whose function takes parameter ``name`` at that position.

    A task whose signature Python cannot read, or that is not registered in
    this process, has no known positions: only its keyword arguments are
    searched by name.
    """
    found: dict[int, list[str]] = {}
    for task_name in registry.names():
        definition = registry.get(task_name)
        if definition is None:
            continue
        signature = call_signature(definition.func, takes_context=definition.takes_context)
        if signature is None:
            continue
        for index, parameter in enumerate(signature.parameters.values()):
            if parameter.kind not in _BY_POSITION:
                break
            if parameter.name == name:
                found.setdefault(index, []).append(task_name)
                break
    return found


def _either(*, raw: str, build: Callable[[Any], Q]) -> Q:
    """``build(value)`` for the value as JSON (or as text); a number also as its text.

    ``'eu west'`` (single quotes) is the text inside; ``"42"`` the JSON string.
    """
    if raw[0] in "'\"" and (len(raw) < 2 or raw[-1] != raw[0]):
        raise InvalidSearch(f"{raw!r} cannot be read: its quote is not closed")
    if raw[0] == "'":
        return build(raw[1:-1])
    try:
        value = json.loads(raw)
    except ValueError:
        return build(raw)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return build(value) | build(raw)
    return build(value)


def _checked(found: Q, value: Any) -> Q:
    _check(value)
    return found


def _check(value: Any) -> None:
    """InvalidSearch for a value PostgreSQL's jsonb refuses (models/storable.py).

    ``json.loads`` reads ``"\\u0000"``, ``"\\ud800"``, ``NaN`` and ``1e400``,
    which jsonb does not take: the statement would fail, a server error.
    """
    try:
        check_json("the argument search", value, max_depth=MAX_DEPTH)
    except InvalidJob as exc:
        raise InvalidSearch(str(exc)) from None
