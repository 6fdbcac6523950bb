"""The enqueue statements: insert jobs, count them and wake the workers in one round trip.

Enqueue runs inside users' web requests, so its cost is what they feel
first. Building the INSERT with Django's compiler for every job cost more
than the database's own work, so each statement is built once per shape and
kept: the columns come from the model, and the values every job shares
(status, attempts, empty history: the model's defaults) are prepared once by
the fields themselves. Per call, only what :data:`PER_JOB` names is prepared,
each by its own field (``get_db_prep_save``), as Django would.

- one job: ``INSERT ... VALUES`` (docs/design.md#enqueue);
- many jobs of one definition: ``INSERT ... SELECT FROM unnest(args, kwargs)``:
  every other column is the same for all of them.

Each statement also counts the inserted rows into this session's counter
shard (services/counters.py) and sends one NOTIFY for the queue. In
autocommit the statement is its own transaction; inside the caller's
``transaction.atomic()`` PostgreSQL delivers the NOTIFY only at commit, and
not at all on rollback. ``pre_save`` and ``post_save`` are not sent, as for
``bulk_create``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

from django.db import connection
from django.db.models import Field

from django_jobretry.models import CounterEvent, Job
from django_jobretry.services.counters import COUNTERS, KEY

if TYPE_CHECKING:
    from django.db.backends.postgresql.operations import DatabaseOperations as PostgresOperations

#: LISTEN/NOTIFY channel; the payload is the queue name.
CHANNEL = "django_jobretry"

#: The columns enqueue sets per job (services/enqueue.py ``_build``); every other
#: column takes the model's default.
PER_JOB = (
    "task_name",
    "queue_name",
    "policy_name",
    "args",
    "kwargs",
    "priority",
    "max_attempts",
    "unique_key",
)
#: Columns given per call of the bulk statement; the rest are one value for all rows.
PER_ROW = ("args", "kwargs")

#: When the job may run: the column's database default (now), a given time, or now plus a delay.
type RunAt = datetime | timedelta | None
#: The shape of the statement each RunAt needs: "default" leaves run_at out.
type RunAtKind = Literal["default", "at", "after"]

# Counted and woken from the inserted rows themselves (RETURNING gives their task
# and queue), so the statement's only parameters are the jobs' own values. A
# data-modifying CTE runs even though the outer SELECT does not read it; the
# NOTIFY is an uncorrelated subquery, evaluated once, and only if a row came back.
_COUNT_AND_WAKE = f"""counted AS (
    INSERT INTO {COUNTERS} AS c (event, task_name, queue_name, shard, value)
    SELECT '{CounterEvent.ENQUEUED.value}', j.task_name, j.queue_name, pg_backend_pid(), count(*)
    FROM j GROUP BY j.task_name, j.queue_name
    ON CONFLICT ({KEY}) DO UPDATE SET value = c.value + EXCLUDED.value
)
SELECT j.*, (SELECT pg_notify('{CHANNEL}', w.queue_name) FROM j AS w LIMIT 1)::text FROM j"""


@dataclass(frozen=True)
class _Statement:
    sql: str
    #: The fields whose values are parameters, in parameter order.
    fields: tuple[Field[Any, Any], ...]


def _prepared(field: Field[Any, Any], value: Any) -> Any:
    """``value`` as ``field`` sends it, except a delay, which is bound as an interval."""
    return value if isinstance(value, timedelta) else field.get_db_prep_save(value, connection)


@functools.cache
def _returning() -> tuple[str, tuple[Field[Any, Any], ...]]:
    fields = tuple(Job._meta.db_returning_fields)
    return ", ".join(connection.ops.quote_name(_column(field)) for field in fields), fields


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


def _values(fields: list[Field[Any, Any]], given: set[str], run_at: RunAtKind) -> list[str]:
    """The SQL of each column's value: a placeholder for those ``given``, else the model default as a literal.

    The literals are what Django's client-side binding would send anyway,
    quoted once instead of on every call.
    """
    template = Job()
    values = []
    for field in fields:
        if field.attname == "run_at" and run_at == "after":
            values.append("(STATEMENT_TIMESTAMP() + %s)")  # the database clock, like every time comparison
        elif field.attname in given:
            values.append("%s")
        else:
            default = _prepared(field, getattr(template, field.attname))
            literal = cast("PostgresOperations", connection.ops).compose_sql("%s", [default])
            values.append(literal.replace("%", "%%"))
    return values


def _statement(insert: str, fields: list[Field[Any, Any]], given: set[str]) -> _Statement:
    returning, _ = _returning()
    sql = f"WITH j AS ({insert} RETURNING {returning}, task_name, queue_name), {_COUNT_AND_WAKE}"
    return _Statement(sql, tuple(field for field in fields if field.attname in given))


def _into(fields: list[Field[Any, Any]]) -> str:
    quote = connection.ops.quote_name
    return f"INSERT INTO {quote(Job._meta.db_table)} ({', '.join(quote(_column(f)) for f in fields)})"


@functools.cache
def _one_job(run_at: RunAtKind) -> _Statement:
    fields = _columns(run_at)
    given = {*PER_JOB, "run_at"}
    return _statement(f"{_into(fields)} VALUES ({', '.join(_values(fields, given, run_at))})", fields, given)


@functools.cache
def _many_jobs(run_at: RunAtKind) -> _Statement:
    """The bulk statement; its parameters are the shared values, then one array per PER_ROW field."""
    fields = _columns(run_at)
    given = {*PER_JOB, "run_at"} - set(PER_ROW)
    values = _values(fields, given, run_at)
    selected = [
        f"u.{f.attname}" if f.attname in PER_ROW else value for f, value in zip(fields, values, strict=True)
    ]
    unnest = ", ".join("%s::jsonb[]" for _ in PER_ROW)
    insert = (
        f"{_into(fields)} SELECT {', '.join(selected)} "
        f"FROM unnest({unnest}) WITH ORDINALITY AS u({', '.join(PER_ROW)}, n) ORDER BY u.n"
    )
    return _statement(insert, fields, given)


def _saved(job: Job, values: tuple[Any, ...]) -> Job:
    """``job`` as saved: the values the database filled in (RETURNING), and no longer "adding"."""
    _, fields = _returning()
    for field, value in zip(fields, values, strict=True):
        setattr(job, field.attname, value)
    job._state.adding = False
    job._state.db = connection.alias
    return job


def insert_one(job: Job, run_at: RunAt) -> None:
    """INSERT ``job``, count it and wake its queue's workers: one statement, one round trip.

    ``run_at`` is how the job's start time is given (see :data:`RunAt`); the
    time the database stored comes back into ``job.run_at``.
    """
    statement = _one_job(_kind(run_at))
    if run_at is not None:
        job.run_at = run_at  # type: ignore[assignment]  # a delay is bound as an interval
    params = [_prepared(field, getattr(job, field.attname)) for field in statement.fields]
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, params)
        row = cursor.fetchone()
    _saved(job, row[: len(_returning()[1])] if row else ())


def insert_many(template: Job, rows: Sequence[tuple[Any, Any]], run_at: RunAt) -> list[Job]:
    """INSERT one job per (args, kwargs) of ``rows``, all else from ``template``: one statement.

    Returns the jobs in the order of ``rows``. ``template`` holds the columns
    every row shares (task, queue, policy, priority, attempts allowed).
    """
    statement = _many_jobs(_kind(run_at))
    if run_at is not None:
        template.run_at = run_at  # type: ignore[assignment]
    params: list[Any] = [_prepared(field, getattr(template, field.attname)) for field in statement.fields]
    meta = Job._meta
    for position, name in enumerate(PER_ROW):
        field = meta.get_field(name)
        params.append([field.get_db_prep_save(row[position], connection) for row in rows])  # type: ignore[union-attr]
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, params)
        returned = cursor.fetchall()
    common = {name: getattr(template, name) for name in PER_JOB if name not in PER_ROW}
    width = len(_returning()[1])
    return [
        _saved(Job(**common, args=args, kwargs=kwargs), values[:width])
        for (args, kwargs), values in zip(rows, returned, strict=True)
    ]
