"""Times as the admin shows them: local time to the second.

The second is the precision of the worker's log lines an operator lines a
row up with (Django's default DATETIME_FORMAT stops at the minute). Every
stored time is one Python can hold: the tables refuse any other
(models/instants.py), so the admin reads the columns as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import Any

from django.contrib import admin
from django.db import models
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from django_jobretry.display.humanize import humanize_age


def text(value: datetime | None) -> str:
    """A time as text: local time to the second; "" for None."""
    return "" if value is None else timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S")


def html(value: datetime | None) -> SafeString | str:
    """:func:`text`, marked up so a narrow column may wrap between the date and the time, never inside."""
    if value is None:
        return ""
    date, time = text(value).split(" ")
    return format_html(
        '<span class="jobretry-date">{}</span> <span class="jobretry-time">{}</span>', date, time
    )


def clock(value: datetime | None, *, today: date | None = None) -> str:
    """The time alone when ``value`` falls on ``today`` (local), else the full :func:`text`."""
    if value is not None and timezone.localtime(value).date() == (today or timezone.localdate()):
        return timezone.localtime(value).strftime("%H:%M:%S")
    return text(value)


def column(name: str, *, sortable: bool = False) -> Callable[[Any, models.Model], SafeString | str]:
    """An admin column or detail field showing ``name`` to the second, labelled like the field."""

    def show(model_admin: Any, obj: models.Model) -> SafeString | str:
        return html(getattr(obj, name))

    show.__name__ = f"{name}_shown"
    return admin.display(description=name.replace("_", " "), ordering=name if sortable else None)(show)


def help_texts(model: type[models.Model]) -> dict[str, str]:
    """The fields' help texts, keyed by the names of their :func:`column` stand-ins."""
    return {
        f"{field.name}_shown": str(field.help_text)
        for field in model._meta.concrete_fields
        if isinstance(field, models.DateTimeField) and field.help_text
    }


def since_html(moment: datetime | None, now: datetime) -> SafeString | str:
    """:func:`html` with its age below it ("1h04m05s ago"): since when a thing is held; "-" for None."""
    if moment is None:
        return "-"
    age = humanize_age(max(now - moment, timedelta(0)))
    return format_html('{}<span class="jobretry-quiet">{} ago</span>', html(moment), age)
