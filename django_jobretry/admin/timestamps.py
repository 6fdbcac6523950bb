"""Timestamps PostgreSQL keeps but Python cannot hold: 'infinity', '-infinity', years past 9999.

A ``timestamptz`` column accepts them (a hand-written UPDATE, a restore, a
bug elsewhere), but psycopg refuses to load them: the whole row fails with
``DataError: timestamp too large``. One such row would make every admin
page that reads it fail. So the admin never loads a datetime column as it
is: each is read as two guarded columns - the value when Python can hold it
(in local time too), else PostgreSQL's own text for it - and shown from
those.

Every time the admin shows is local time to the second, the precision of
the worker's log lines an operator lines it up with (Django's default
DATETIME_FORMAT stops at the minute).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db import models
from django.db.models import Case, F, Q, QuerySet, Value, When
from django.db.models.functions import Cast
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from django_jobretry.models.instants import holdable

if TYPE_CHECKING:  # generic only in django-stubs, not at run time
    _QuerySet = QuerySet[Any]
else:
    _QuerySet = QuerySet

#: What a guarded timestamp is: a datetime, PostgreSQL's text for one Python cannot hold, or None.
Shown = datetime | str | None


def datetime_fields(model: type[models.Model]) -> list[str]:
    return [field.name for field in model._meta.concrete_fields if isinstance(field, models.DateTimeField)]


def _value(name: str) -> str:
    return f"jobretry_{name}_value"


def _text(name: str) -> str:
    return f"jobretry_{name}_text"


def guard(queryset: _QuerySet) -> _QuerySet:
    """``queryset`` with its datetime columns deferred, each read through the guard instead."""
    names = datetime_fields(queryset.model)
    guarded: dict[str, Any] = {}
    for name in names:
        guarded[_value(name)] = Case(
            When(holdable(name), then=F(name)), default=None, output_field=models.DateTimeField()
        )
        out_of_range = Q(**{f"{name}__isnull": False}) & ~holdable(name)
        guarded[_text(name)] = Case(
            When(out_of_range, then=Cast(name, models.TextField())),
            default=Value(None),
            output_field=models.TextField(),
        )
    result: _QuerySet = queryset.defer(*names).annotate(**guarded)
    return result


def shown(obj: models.Model, name: str) -> Shown:
    """``obj.<name>`` as read through :func:`guard`: a datetime, a text like "infinity", or None."""
    if not hasattr(obj, _value(name)):  # not read through the guard: the field as loaded
        loaded: Shown = getattr(obj, name)
        return loaded
    value: Shown = getattr(obj, _value(name))
    return value if value is not None else getattr(obj, _text(name), None)


def text(value: Shown) -> str:
    """A guarded timestamp as text: local time to the second; 'infinity' as PostgreSQL writes it."""
    if isinstance(value, datetime):
        return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S")
    return value or ""


def html(value: Shown) -> SafeString | str:
    """:func:`text`, marked up so a narrow column may wrap between the date and the time, never inside."""
    if isinstance(value, datetime):
        date, time = text(value).split(" ")
        return format_html(
            '<span class="jobretry-date">{}</span> <span class="jobretry-time">{}</span>', date, time
        )
    return text(value)


def clock(value: Shown, *, today: date | None = None) -> str:
    """The time alone when ``value`` falls on ``today`` (local), else the full :func:`text`."""
    if isinstance(value, datetime):
        local = timezone.localtime(value)
        if local.date() == (today or timezone.localdate()):
            return local.strftime("%H:%M:%S")
    return text(value)


def column(name: str, *, sortable: bool = False) -> Callable[[Any, models.Model], SafeString | str]:
    """An admin column or detail field showing the guarded ``name`` to the second, labelled like the field."""

    def show(model_admin: Any, obj: models.Model) -> SafeString | str:
        return html(shown(obj, name))

    show.__name__ = f"{name}_shown"
    return admin.display(description=name.replace("_", " "), ordering=name if sortable else None)(show)


def help_texts(model: type[models.Model]) -> dict[str, str]:
    """The fields' help texts, keyed by the names of their :func:`column` stand-ins."""
    return {
        f"{field.name}_shown": str(field.help_text)
        for field in model._meta.concrete_fields
        if isinstance(field, models.DateTimeField) and field.help_text
    }
