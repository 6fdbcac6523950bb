"""The enqueue statements: insert jobs, count them and wake the workers in one round trip.

Enqueue runs inside users' web requests, so its cost is what they feel
first, and most of it was Python: building the INSERT with Django's
compiler, then per call a ``Model.__init__``, each field's
``get_db_prep_save`` and the client-side binding of every value. So each
statement is built once per definition (:class:`Shared`: task, queue,
policy, priority, attempts allowed) and kept, with those columns and the
model's defaults written in as literals (prepared by the fields
themselves, once). Per call only the arguments (the JSON text validation
already made, cast to ``jsonb``), the unique key and a given ``run_at``
are bound, and the returned :class:`Job` is a copy of a prototype built
once per definition (:func:`new_jobs`), not a new ``Model.__init__``.

- one job: ``INSERT ... VALUES`` (docs/design.md#enqueue);
- many jobs of one definition: ``INSERT ... SELECT FROM unnest(args, kwargs)``;
  it returns the new ids as one array and the database-filled columns
  once: they are the same for every row of one statement (``now()``,
  constants, the same ``run_at``).

Each statement also appends the count of its rows to the counters
(console/counters.py) and sends one NOTIFY for the queue. In
autocommit the statement is its own transaction; inside the caller's
``transaction.atomic()`` PostgreSQL delivers the NOTIFY only at commit, and
not at all on rollback. ``pre_save`` and ``post_save`` are not sent, as for
``bulk_create``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

from django.db import connection
from django.db.models import Field
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from django_jobretry.console.counters import COUNTERS
from django_jobretry.jobs.statements import enqueue_sql
from django_jobretry.models import CounterEvent, Job
from django_jobretry.validation import Arguments

if TYPE_CHECKING:
    from django.db.backends.postgresql.operations import DatabaseOperations as PostgresOperations

#: LISTEN/NOTIFY channel; the payload is the queue name.
CHANNEL = "django_jobretry"
#: How many definitions keep their statements and prototype (least recently used first out).
CACHED_DEFINITIONS = 512
#: The arguments, given per job (never taken from the prototype), bound as JSON text and cast to jsonb.
ARGUMENTS = ("args", "kwargs")

#: Bound per call of the one-job statement, besides the arguments (and run_at when given).
PER_CALL = ("unique_key", "unique_for", "limit_lane", "trace_context")
#: Bound once per statement, for every row of a bulk one: the enqueuer's trace context (jobs/tracing.py).
PER_STATEMENT = ("trace_context",)
#: Bound as JSON text and cast: the arguments and the trace context.
JSON_COLUMNS = (*ARGUMENTS, *PER_STATEMENT)
#: Bound per job of the bulk statement as one array each, like the arguments (limits/__init__.py).
PER_ROW = ("limit_lane",)
#: Both take the given start time: ``run_at`` is when the job may run (retries and holds move it),
#: ``run_after`` keeps what the enqueue gave (NULL: nothing given, where ``run_at`` is now).
RUN_AT_COLUMNS = ("run_at", "run_after")

#: When the job may run: the column's database default (now), a given time, or now plus a delay.
type RunAt = datetime | timedelta | None
#: The shape of the statement each RunAt needs: "default" leaves run_at out.
type RunAtKind = Literal["default", "at", "after"]


@dataclass(frozen=True)
class Shared:
    """The columns every job of one definition has; its statements write them as literals."""

    task_name: str
    queue_name: str
    policy_name: str
    priority: int
    max_attempts: int


@dataclass(frozen=True)
class _Statement:
    sql: str
    #: The fields whose values are parameters, in parameter order.
    fields: tuple[Field[Any, Any], ...]


def _prepared(field: Field[Any, Any], value: Any) -> Any:
    """``value`` as ``field`` sends it, except a delay, which is bound as an interval."""
    return value if isinstance(value, timedelta) else field.get_db_prep_save(value, connection)


@functools.cache
def _returning() -> tuple[tuple[str, ...], tuple[Field[Any, Any], ...]]:
    """The columns the database fills in (the key, ``db_default``s), which RETURNING gives back."""
    fields = tuple(Job._meta.db_returning_fields)
    if fields[0] is not Job._meta.pk:  # pragma: no cover - Django lists the key first
        raise TypeError(f"RETURNING must start with the key, not {fields[0]!r}")
    return tuple(connection.ops.quote_name(_column(field)) for field in fields), fields


def _column(field: Field[Any, Any]) -> str:
    if field.column is None:  # pragma: no cover - every concrete field has a column
        raise TypeError(f"{field!r} has no column")
    return field.column


def _kind(run_at: RunAt) -> RunAtKind:
    if run_at is None:
        return "default"
    return "after" if isinstance(run_at, timedelta) else "at"


def _columns(run_at: RunAtKind) -> list[Field[Any, Any]]:
    """Every column an INSERT names: all but the key and those left to their database default."""
    meta = Job._meta
    return [
        field
        for field in meta.local_concrete_fields
        if not field.generated
        and field is not meta.pk
        and (not field.has_db_default() or (field.attname == "run_at" and run_at != "default"))
    ]


def _literal(field: Field[Any, Any], value: Any) -> str:
    """``value`` as ``field`` would bind it, quoted once into the statement's text."""
    literal: str = cast("PostgresOperations", connection.ops).compose_sql("%s", [_prepared(field, value)])
    return literal.replace("%", "%%")


def _values(
    fields: list[Field[Any, Any]], bound: set[str], run_at: RunAtKind, prototype: dict[str, Any]
) -> list[str]:
    """The SQL of each column's value: a placeholder for those ``bound``, else the prototype's value."""
    values = []
    for field in fields:
        if field.attname in RUN_AT_COLUMNS and run_at == "after":
            values.append("(STATEMENT_TIMESTAMP() + %s)")  # the database clock, like every time comparison
        elif field.attname in JSON_COLUMNS:
            values.append("%s::jsonb")
        elif field.attname in bound:
            values.append("%s")
        else:
            values.append(_literal(field, prototype[field.attname]))
    return values


def _into(fields: list[Field[Any, Any]], rows: str) -> str:
    return enqueue_sql([_column(field) for field in fields], rows)


def _parameters(fields: list[Field[Any, Any]], bound: set[str]) -> tuple[Field[Any, Any], ...]:
    return tuple(field for field in fields if field.attname in bound)


def _count_and_wake(shared: Shared) -> tuple[str, str]:
    """The CTE that appends the count of ``j``'s rows, and the NOTIFY of the outer SELECT.

    Every row of one statement has ``shared``'s task and queue, so both are
    literals. A data-modifying CTE runs even though the outer SELECT does
    not read it; the outer SELECT returns one row (one job, or the bulk
    statement's aggregate), so the NOTIFY is sent once.
    """
    task = _literal(Job._meta.get_field("task_name"), shared.task_name)
    queue = _literal(Job._meta.get_field("queue_name"), shared.queue_name)
    counted = (
        f"counted AS (INSERT INTO {COUNTERS} (event, task_name, queue_name, shard, value) "
        f"SELECT '{CounterEvent.ENQUEUED.value}', {task}, {queue}, NULL, count(*) FROM j)"
    )
    return counted, f"pg_notify('{CHANNEL}', {queue})::text"


@functools.lru_cache(maxsize=CACHED_DEFINITIONS)
def _one_job(shared: Shared, run_at: RunAtKind) -> _Statement:
    fields = _columns(run_at)
    bound = {*ARGUMENTS, *PER_CALL, *RUN_AT_COLUMNS}
    values = _values(fields, bound, run_at, prototype(shared))
    returning = ", ".join(_returning()[0])
    insert = _into(fields, f"VALUES ({', '.join(values)})")
    counted, wake = _count_and_wake(shared)
    sql = f"WITH j AS ({insert} RETURNING {returning}), {counted} SELECT {returning}, {wake} FROM j"
    return _Statement(sql, _parameters(fields, bound))


@functools.lru_cache(maxsize=CACHED_DEFINITIONS)
def _many_jobs(shared: Shared, run_at: RunAtKind) -> _Statement:
    """The bulk statement: one array per argument column; one row back, the ids as an array."""
    fields = _columns(run_at)
    bound = {*ARGUMENTS, *PER_ROW, *PER_STATEMENT, *RUN_AT_COLUMNS}
    values = _values(fields, bound, run_at, prototype(shared))
    per_row = (*ARGUMENTS, *PER_ROW)
    selected = [f"u.{f.attname}" if f.attname in per_row else v for f, v in zip(fields, values, strict=True)]
    unnest = ", ".join(["%s::jsonb[]" for _ in ARGUMENTS] + ["%s::text[]" for _ in PER_ROW])
    key, *filled = _returning()[0]
    # Every row of one statement gets the same filled-in values (now(), constants, one run_at).
    once = ", ".join(f"(array_agg(j.{column}))[1]" for column in filled)
    counted, wake = _count_and_wake(shared)
    rows = (
        f"SELECT {', '.join(selected)} "
        f"FROM unnest({unnest}) WITH ORDINALITY AS u({', '.join(per_row)}, n) ORDER BY u.n"
    )
    sql = (
        f"WITH j AS ({_into(fields, rows)} RETURNING {key}, {', '.join(filled)}), "
        f"{counted} SELECT array_agg(j.{key} ORDER BY j.{key}), {once}, {wake} FROM j"
    )
    return _Statement(sql, tuple(f for f in _parameters(fields, bound) if f.attname not in per_row))


def _filled(row: Sequence[Any]) -> dict[str, Any]:
    """The returned columns, by attribute name; the NOTIFY's column after them is left out."""
    return {field.attname: value for field, value in zip(_returning()[1], row, strict=False)}


def insert_one(
    shared: Shared,
    arguments: Arguments,
    unique_key: str | None,
    run_at: RunAt,
    lane: str | None = None,
    *,
    unique_for: timedelta | None = None,
    trace: dict[str, str] | None = None,
) -> Job:
    """INSERT one job, count it and wake its queue's workers: one statement, one round trip.

    ``run_at`` is how the job's start time is given (see :data:`RunAt`); the
    time the database stored comes back in the job's ``run_at``. ``lane``:
    its limit lane (limits/__init__.py), None when no limit applies.
    ``unique_for``: how long ``unique_key`` stays taken after the job succeeds.
    ``trace``: the enqueuer's trace context (jobs/tracing.py), None without one.
    """
    statement = _one_job(shared, _kind(run_at))
    given: dict[str, Any] = {
        "args": arguments.args_json,
        "kwargs": arguments.kwargs_json,
        "unique_key": unique_key,
        "unique_for": unique_for,
        "limit_lane": lane,
        "trace_context": _json(trace),
    }
    params = [
        given[field.attname] if field.attname in given else _prepared(field, run_at)
        for field in statement.fields
    ]
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, params)
        row = cursor.fetchone()
    if row is None:  # pragma: no cover - an INSERT ... VALUES returns its row or raises
        raise RuntimeError("the enqueue statement returned no row")
    values = {
        "args": arguments.args,
        "kwargs": arguments.kwargs,
        "unique_key": unique_key,
        "unique_for": unique_for,
        "limit_lane": lane,
        "trace_context": trace,
        **_filled(row),
    }
    values["run_after"] = None if run_at is None else values["run_at"]  # one expression gave both
    return new_jobs(shared)(values)


def insert_many(
    shared: Shared,
    rows: Sequence[Arguments],
    run_at: RunAt,
    lanes: Sequence[str | None] | None = None,
    *,
    trace: dict[str, str] | None = None,
) -> list[Job]:
    """INSERT one job per checked ``rows`` entry: one statement. Returns the jobs in the order of ``rows``.

    ``lanes``: each job's limit lane, in the order of ``rows`` (None: no limit applies to any).
    ``trace``: the enqueuer's trace context, stored on every job.
    """
    statement = _many_jobs(shared, _kind(run_at))
    lanes = list(lanes) if lanes is not None else [None] * len(rows)
    params: list[Any] = [
        _json(trace) if field.attname in PER_STATEMENT else _prepared(field, run_at)
        for field in statement.fields
    ]
    params += [[row.args_json for row in rows], [row.kwargs_json for row in rows], lanes]
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, params)
        returned = cursor.fetchone()
    if returned is None or len(returned[0]) != len(rows):  # pragma: no cover - one row per call, always
        raise RuntimeError("the bulk enqueue statement did not return every new id")
    ids, *filled = returned
    common, new_job = _filled([None, *filled]), new_jobs(shared)
    common["run_after"] = None if run_at is None else common["run_at"]  # one expression gave both
    return [
        new_job(
            {
                **common,
                "args": row.args,
                "kwargs": row.kwargs,
                "limit_lane": lane,
                "id": job_id,
                "trace_context": trace,
            }
        )
        for row, lane, job_id in zip(rows, lanes, ids, strict=True)
    ]


def _json(value: dict[str, str] | None) -> str | None:
    return None if value is None else json.dumps(value)


# -- the saved Job instances an enqueue returns, built without ``Model.__init__`` per job
@functools.lru_cache(maxsize=CACHED_DEFINITIONS)
def prototype(shared: Shared) -> dict[str, Any]:
    """A job of ``shared`` as ``Job(...)`` builds it, without ``_state``: copied for each new job."""
    values = dict(vars(Job(**vars(shared))))
    del values["_state"]
    return values


@functools.cache
def _fresh_defaults() -> tuple[Field[Any, Any], ...]:
    """Fields whose default is made by a call (``list``, ``dict``): each job needs its own."""
    return tuple(
        field
        for field in Job._meta.concrete_fields
        if field.has_default() and callable(field.default) and field.attname not in ARGUMENTS
    )


def new_jobs(shared: Shared) -> Callable[[dict[str, Any]], Job]:
    """Makes saved jobs of ``shared``: copies of the prototype, as unpickling builds them, or
    ``Job(...)`` when something listens to ``pre_init``/``post_init``, so those still fire."""
    alias = connection.alias

    def saved(job: Job) -> Job:
        job._state.adding, job._state.db = False, alias
        return job

    if pre_init.has_listeners(Job) or post_init.has_listeners(Job):
        columns = vars(shared)
        return lambda values: saved(Job(**columns, **values))
    attributes_of, fresh = prototype(shared), _fresh_defaults()

    def copy(values: dict[str, Any]) -> Job:
        job = Job.__new__(Job)
        attributes = job.__dict__
        attributes.update(attributes_of)
        for field in fresh:
            attributes[field.attname] = field.get_default()
        attributes.update(values)
        attributes["_state"] = ModelState()
        return saved(job)

    return copy
