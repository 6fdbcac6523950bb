"""The JSON columns of jobs and dead letters, and the CHECKs on their shape."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models.lookups import Exact


class StoredJSONField(models.JSONField):
    """A JSONField that hands back the stored text when Python cannot decode it.

    PostgreSQL keeps JSON nested thousands of levels deep; Python's decoder
    stops at its recursion limit. Django's JSONField already returns the raw
    text of a value that is not JSON; this does the same for one nested too
    deep, so one hand-written row cannot make every page and command that
    loads it fail. Readers check the type (django_jobretry.display.redaction).
    """

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        try:
            return super().from_db_value(value, expression, connection)
        except RecursionError:
            return value


class JSONType(models.Func):
    """``jsonb_typeof(column)``: 'array', 'object', 'string', 'number', 'boolean' or 'null'."""

    function = "jsonb_typeof"
    output_field = models.TextField()


def json_shapes(table: str, **kinds: str) -> list[models.CheckConstraint]:
    """One CHECK per ``column=kind``: the column's top-level JSON type, named ``<table>_<column>_<kind>``.

    A CHECK cannot see inside: entries of a history may still be anything,
    and a value nested past Python's recursion limit still loads as text.
    """
    return [
        models.CheckConstraint(condition=Exact(JSONType(name), kind), name=f"{table}_{name}_{kind}")
        for name, kind in kinds.items()
    ]


class JSONStringArray(models.Func):
    """Whether a jsonb value is an array of strings (nothing nested, so Python always loads it)."""

    template = (
        "(jsonb_typeof(%(expressions)s) = 'array' AND NOT jsonb_path_exists("
        "%(expressions)s, 'strict $[*] ? (@.type() != \"string\")'))"
    )
    output_field = models.BooleanField()


class GinPathIndex(models.Index):
    """A GIN index (``jsonb_path_ops``) that needs no ``django.contrib.postgres`` in INSTALLED_APPS.

    django.contrib.postgres's GinIndex refuses to load without that app (system
    check postgres.E005); requiring it of every project for one index of ours
    would be a surprise. Django's own Index writes ``USING gin`` when asked,
    and takes the operator class: this is that, and nothing more. It serves
    JSON containment, ``column @> '[{"key": value}]'``.
    """

    suffix = "gin"

    def __init__(self, *, field: str, name: str, condition: models.Q | None = None) -> None:
        super().__init__(fields=[field], opclasses=["jsonb_path_ops"], name=name, condition=condition)

    def create_sql(self, model: Any, schema_editor: Any, using: str = "", **kwargs: Any) -> Any:
        return super().create_sql(model, schema_editor, using=" USING gin", **kwargs)

    def deconstruct(self) -> Any:
        path, args, kwargs = super().deconstruct()
        return (
            path,
            args,
            {"field": kwargs["fields"][0], "name": kwargs["name"], "condition": kwargs.get("condition")},
        )
