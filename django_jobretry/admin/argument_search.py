"""Search by arguments: "the dead letters of customer 42", for users who may read arguments.

The dead-letter and job lists get an "Arguments" search in their sidebar
(``?arguments=…``), answered by jsonb containment (``@>``) on the GIN
indexes of ``args`` and ``kwargs`` (jobretry_dead_args/_kwargs; on jobs,
partial indexes over retrying jobs only, so enqueue and the claim pay
nothing). What one may type:

- ``customer_id=42``: a keyword argument, its value read as JSON when it
  is (``42``, ``true``, ``"42"``, ``{"id": 1}``), else as text (``'eu
  west'`` in single quotes is the text inside); a number also matches the
  same digits stored as a string. A dotted name looks
  inside: ``order.id=7`` is ``{"order": {"id": 7}}``. Several terms, space
  separated (quote a value with spaces), must all match.
- a bare value, ``42`` or ``"abc"``: a positional argument.
- a JSON object or array: ``{"customer_id": 42, "region": "eu"}`` matches
  keyword arguments containing it, ``[42]`` positional ones.

A filter answers "does any row match?", so it reads values one guess at a
time: users who may not read arguments unredacted (admin/rendering.py
``can_filter_payload``) see no field, and the parameter in a URL is
refused with a 400 before any query, as every other argument filter is
(admin/base.py ``lookup_allowed``). A search that cannot be read is the
list's error page, with a message saying what is wrong; nothing runs. So
is one that reads but that PostgreSQL's jsonb would refuse: an escaped NUL
or lone surrogate, NaN or an infinity, more than MAX_DEPTH levels.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterator
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.exceptions import DisallowedModelAdminLookup
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from django_jobretry.admin import rendering
from django_jobretry.exceptions import InvalidJob
from django_jobretry.models.job import RETRYING
from django_jobretry.models.storable import check_json

#: Longest search accepted, in characters: a search, not a payload.
MAX_CHARS = 1000
#: Deepest value a search may hold, in levels (a keyword's dotted name counts): deeper than any
#: argument an enqueue accepts (MAX_ARGS_DEPTH), and far from Django's recursion over nested lists.
MAX_DEPTH = 100
EXAMPLE = 'customer_id=42, order.id=7 region=eu, 42, or {"customer_id": 42}'


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
        return _contains("kwargs" if isinstance(value, dict) else "args", value)
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
        return _either(raw=name, build=lambda value: _contains("args", [value]))
    path = name.split(".")
    if not all(part.strip() for part in path):
        raise InvalidSearch(f"{term!r}: a name before '=' (e.g. {EXAMPLE})")
    if not raw:
        raise InvalidSearch(f"{term!r}: a value after '=' (e.g. customer_id=42)")

    def nested(value: Any) -> Q:
        for part in reversed(path):
            value = {part: value}
        return _contains("kwargs", value)

    return _either(raw=raw, build=nested)


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


def _contains(field: str, value: Any) -> Q:
    """``field @> value``, or InvalidSearch for a value PostgreSQL's jsonb refuses (models/storable.py).

    ``json.loads`` reads ``"\\u0000"``, ``"\\ud800"``, ``NaN`` and ``1e400``,
    which jsonb does not take: the statement would fail, a server error.
    """
    try:
        check_json("the argument search", value, max_depth=MAX_DEPTH)
    except InvalidJob as exc:
        raise InvalidSearch(str(exc)) from None
    return Q(**{f"{field}__contains": value})


class ArgumentSearch(admin.ListFilter):
    """The sidebar's "Arguments" field; ``scope`` narrows the rows its index covers (jobs: retrying)."""

    title = "arguments"
    parameter_name = "arguments"
    template = "admin/django_jobretry/includes/argument_search.html"
    #: Rows the search reaches, matching the partial indexes' condition (None: every row).
    scope: Q | None = None
    help_text = "Every dead letter whose arguments contain this."

    def __init__(self, request: HttpRequest, params: dict[str, Any], model: Any, model_admin: Any) -> None:
        super().__init__(request, params, model, model_admin)
        self.allowed = rendering.can_filter_payload(request)
        self.request = request
        self.text: str | None = None
        if self.parameter_name in params:
            if not self.allowed:
                raise DisallowedModelAdminLookup(f"Filtering by {self.parameter_name} not allowed")
            given = params.pop(self.parameter_name)
            self.text = given[-1] if isinstance(given, list) else given

    def has_output(self) -> bool:
        return self.allowed

    def expected_parameters(self) -> list[str | None]:
        return [self.parameter_name]

    def choices(self, changelist: Any) -> Iterator[dict[str, Any]]:
        """One "choice": what the form needs, the other filters kept as hidden fields."""
        kept = [
            (key, value)
            for key, values in changelist.params.items()
            for value in (values if isinstance(values, list) else [values])
            if key != self.parameter_name
        ]
        yield {"value": self.text or "", "kept": kept, "help": self.help_text, "example": EXAMPLE}

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.text is None:
            return queryset
        try:
            found = containment(self.text)
        except InvalidSearch as exc:
            messages.error(request, str(exc))
            raise IncorrectLookupParameters(str(exc)) from exc
        return queryset.filter(found if self.scope is None else found & self.scope)


class RetryingArgumentSearch(ArgumentSearch):
    """The job list's: retrying jobs only, the rows its partial GIN indexes hold."""

    scope = RETRYING
    help_text = "Every retrying job whose arguments contain this (other jobs are not searched)."
