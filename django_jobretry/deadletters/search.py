"""Finding dead letters by what they share: a failure (groups), or an argument (search).

Failure groups: an operator after an outage reads problems, not rows: per
fingerprint (models/fingerprints.py) how many dead letters, first and last
seen, which tasks and reasons, and one example message. The count comes from
the (fingerprint, task_name, reason, dead_at) index alone: an index-only scan
already in group order, grouped twice (per task and reason, then per
fingerprint), with no sort of the rows and no visit to the table. The example
of a group is one index lookup: the newest dead letter of its (last, in name
order) task and reason.

Search by arguments: "the dead letters of customer 42", read from a line of text into a query.

Used by the admin's sidebar search (deadletters/admin.py ``ArgumentSearch``) and by
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
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Q

from django_jobretry.exceptions import InvalidJob
from django_jobretry.models import DeadLetter
from django_jobretry.models.instants import check_json
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
    """InvalidSearch for a value PostgreSQL's jsonb refuses (models/instants.py).

    ``json.loads`` reads ``"\\u0000"``, ``"\\ud800"``, ``NaN`` and ``1e400``,
    which jsonb does not take: the statement would fail, a server error.
    """
    try:
        check_json("the argument search", value, max_depth=MAX_DEPTH)
    except InvalidJob as exc:
        raise InvalidSearch(str(exc)) from None


# --- failure groups ---------------------------------------------------------------------------

#: Most groups one call returns: a page an operator reads, not an export.
MAX_GROUPS = 500
_TABLE = DeadLetter._meta.db_table


@dataclass(frozen=True)
class FailureGroup:
    """One fingerprint's dead letters: ``count`` of them, dead from ``first_seen`` to ``last_seen``."""

    fingerprint: str
    count: int
    first_seen: datetime
    last_seen: datetime
    tasks: list[str]
    reasons: list[str]
    example_class: str
    example_message: str


def groups(*, since: timedelta | datetime | None = None, limit: int = 50) -> list[FailureGroup]:
    """The largest failure groups, biggest first (then the most recently seen); ``since`` as filtered()'s.

    ``since`` is a time, or how far back from the database's now: the
    dashboard's "last 24 hours". ``limit``: from 1 to MAX_GROUPS.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_GROUPS:
        raise ValueError(f"limit {limit!r} is invalid: an integer from 1 to {MAX_GROUPS}")
    sql, params = query(since=since, limit=limit)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [FailureGroup(*row) for row in cursor.fetchall()]


def query(*, since: timedelta | datetime | None, limit: int) -> tuple[str, list[Any]]:
    """The one statement of groups(), and its parameters (EXPLAINed by the tests)."""
    where, params = _since(since)
    sql = f"""
        WITH parts AS (
            SELECT fingerprint, task_name, reason, count(*) AS n,
                   min(dead_at) AS first_seen, max(dead_at) AS last_seen
            FROM {_TABLE} {where}
            GROUP BY fingerprint, task_name, reason
        ), grouped AS (
            SELECT fingerprint, sum(n)::bigint AS n, min(first_seen) AS first_seen,
                   max(last_seen) AS last_seen,
                   array_agg(DISTINCT task_name ORDER BY task_name) AS tasks,
                   array_agg(DISTINCT reason ORDER BY reason) AS reasons
            FROM parts GROUP BY fingerprint
            ORDER BY n DESC, last_seen DESC, fingerprint LIMIT %s
        )
        SELECT g.fingerprint, g.n, g.first_seen, g.last_seen, g.tasks, g.reasons,
               e.last_error_class, e.last_error
        FROM grouped AS g
        CROSS JOIN LATERAL (
            SELECT last_error_class, last_error FROM {_TABLE} AS d
            WHERE d.fingerprint = g.fingerprint
            ORDER BY d.task_name DESC, d.reason DESC, d.dead_at DESC LIMIT 1
        ) AS e
        ORDER BY g.n DESC, g.last_seen DESC, g.fingerprint
    """
    return sql, [*params, limit]


def _since(since: timedelta | datetime | None) -> tuple[str, list[Any]]:
    if since is None:
        return "", []
    if isinstance(since, timedelta):
        return "WHERE dead_at >= statement_timestamp() - %s", [since]
    if isinstance(since, datetime):
        if since.tzinfo is None or since.utcoffset() is None:
            raise ValueError(f"since {since.isoformat()!r} is invalid: a datetime with a time zone")
        return "WHERE dead_at >= %s", [since]
    raise ValueError(f"since {since!r} is invalid: a datetime or a timedelta")
