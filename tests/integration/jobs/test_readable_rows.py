"""The tables refuse rows no reader could load (issue 19, point 5): each CHECK by name, against raw SQL.

A ``timestamptz`` holds 'infinity', '-infinity', years up to 294276 and
before 1; psycopg loads none of them. A JSON column holds any JSON; a
worker's lease any interval. Before these constraints, every reader coped
(guarded columns, "unreadable", None); now the write itself fails, naming
the constraint, as a hand-written UPDATE or a bad restore would run it.
What a CHECK cannot see is still read whatever it holds: entries inside a
history (test_admin_security.py, test_tasks_backend_hostile.py) and JSON
nested past Python's recursion limit (test_worker_hostile.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.postgres.operations import AddConstraintNotValid, ValidateConstraint
from django.db import IntegrityError, connection, models, transaction
from django.db.migrations.state import ProjectState

from django_jobretry.models import DeadLetter, Job, WorkerProcess
from django_jobretry.models.instants import EARLIEST, LATEST
from tests.factories import DeadLetterFactory, JobFactory, WorkerProcessFactory

pytestmark = pytest.mark.django_db

#: Times PostgreSQL stores and Python cannot load, and the day beyond each end of the range.
UNHOLDABLE = [
    "'infinity'",
    "'-infinity'",
    "'20000-01-01 00:00+00'",
    "'294276-12-31 23:30:00+00'",
    "'0002-01-01 00:00+00 BC'",
    "'9999-12-31 00:00+00'",
    "'0001-01-01 00:00+00'",
]

#: Model -> (a factory for a row with every nullable time set, the constraint names' prefix).
ROWS: dict[type[models.Model], tuple[Callable[[], models.Model], str]] = {
    Job: (lambda: JobFactory.create(running=True, cancel_requested_at="2026-01-01T00:00Z"), "jobretry_job"),
    DeadLetter: (DeadLetterFactory.create, "jobretry_dead"),
    WorkerProcess: (WorkerProcessFactory.create, "jobretry_worker"),
}
TIMES = [
    (model, field.name)
    for model in ROWS
    for field in model._meta.concrete_fields
    if isinstance(field, models.DateTimeField)
]

#: (model, column, a value of the wrong shape, the constraint it breaks).
SHAPES = [
    *(
        (model, column, value, f"{prefix}_{column}_{kind}")
        for model, prefix in ((Job, "jobretry_job"), (DeadLetter, "jobretry_dead"))
        for column, kind, values in (
            ("args", "array", ["'{\"a\": 1}'", "'\"text\"'", "'null'", "'1'"]),
            ("kwargs", "object", ["'[]'", "'\"text\"'", "'null'"]),
            ("errors", "array", ['\'{"not": "a list"}\'', "'\"x\"'"]),
            ("requeue_history", "array", ["'{}'", "'3'"]),
        )
        for value in values
    ),
    *(
        (WorkerProcess, "queues", value, "jobretry_worker_queues_names")
        for value in [
            """'[1, ["a"], null, {"q": 1}]'""",
            "'5'",
            "'null'",
            "'{}'",
            "(repeat('[', 5000) || repeat(']', 5000))",
        ]
    ),
    *(
        (WorkerProcess, "lease", value, "jobretry_worker_lease_range")
        for value in [
            "interval '0'",
            "interval '-1 s'",
            "interval '1 day 1 s'",
            "interval '170000000 years'",
            "interval '-170000000 years'",
        ]
    ),
]


def table(model: type[models.Model]) -> str:
    return model._meta.db_table


def write(model: type[models.Model], pk: int, column: str, value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table(model)} SET {column} = {value} WHERE id = %s", [pk])


def refused(model: type[models.Model], pk: int, column: str, value: str) -> str:
    """The constraint an UPDATE of ``column`` to ``value`` breaks; the row stays as it was."""
    before = model._default_manager.values_list(column, flat=True).get(pk=pk)
    with pytest.raises(IntegrityError) as caught, transaction.atomic():
        write(model, pk, column, value)
    assert model._default_manager.values_list(column, flat=True).get(pk=pk) == before
    return str(caught.value.__cause__.diag.constraint_name)


@pytest.mark.parametrize(("model", "column"), TIMES, ids=[f"{m.__name__}.{c}" for m, c in TIMES])
def test_a_time_python_cannot_hold_is_refused(model: type[models.Model], column: str) -> None:
    make, prefix = ROWS[model]
    row = make()
    for value in UNHOLDABLE:
        assert refused(model, row.pk, column, f"{value}::timestamptz") == f"{prefix}_{column}_holdable", value


@pytest.mark.parametrize(("model", "column"), TIMES, ids=[f"{m.__name__}.{c}" for m, c in TIMES])
def test_the_first_and_last_holdable_instants_are_kept(model: type[models.Model], column: str) -> None:
    row = ROWS[model][0]()
    for instant in (EARLIEST, LATEST):
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {table(model)} SET {column} = %s WHERE id = %s", [instant, row.pk])
        assert getattr(model._default_manager.get(pk=row.pk), column) == instant


@pytest.mark.parametrize(
    ("model", "column", "value", "constraint"),
    SHAPES,
    ids=[f"{m.__name__}.{c}={v[:24]}" for m, c, v, _ in SHAPES],
)
def test_json_and_a_lease_no_reader_can_use_are_refused(
    model: type[models.Model], column: str, value: str, constraint: str
) -> None:
    row = ROWS[model][0]()
    cast = "::jsonb" if column != "lease" else ""
    assert refused(model, row.pk, column, f"{value}{cast}") == constraint


def test_validating_over_an_old_bad_row_fails_naming_the_constraint_until_the_row_is_mended() -> None:
    """What 0017 does on a table that already held a bad row when 0016 added the constraint NOT VALID.

    The SQL that finds the row is docs/install.md#upgrading-big-tables's.
    """
    good, bad = JobFactory.create(), JobFactory.create()
    name = "jobretry_job_run_at_holdable"
    constraint = next(c for c in Job._meta.constraints if c.name == name)
    state = ProjectState.from_apps(Job._meta.apps)
    with connection.schema_editor() as editor:
        editor.remove_constraint(Job, constraint)
    write(Job, bad.pk, "run_at", "'infinity'")  # a row from before the upgrade
    with connection.schema_editor() as editor:
        AddConstraintNotValid("job", constraint).database_forwards("django_jobretry", editor, state, state)
    assert refused(Job, good.pk, "run_at", "'-infinity'") == name  # new writes are checked at once

    validate = ValidateConstraint("job", name)
    with pytest.raises(IntegrityError) as caught, transaction.atomic(), connection.schema_editor() as editor:
        validate.database_forwards("django_jobretry", editor, state, state)
    assert caught.value.__cause__.diag.constraint_name == name

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, run_at::text FROM {table(Job)}"
            " WHERE NOT (run_at BETWEEN '0001-01-02 00:00+00' AND '9999-12-30 00:00+00')"
        )
        assert cursor.fetchall() == [(bad.pk, "infinity")]
        cursor.execute(f"UPDATE {table(Job)} SET run_at = now() WHERE id = %s", [bad.pk])
    with connection.schema_editor() as editor:
        validate.database_forwards("django_jobretry", editor, state, state)
    with connection.cursor() as cursor:
        cursor.execute("SELECT convalidated FROM pg_constraint WHERE conname = %s", [name])
        assert cursor.fetchone() == (True,)
