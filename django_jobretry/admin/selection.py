"""Which dead letters an admin request means: ticked rows, "select all", or ids a confirmation pinned.

Everything here is read from a POST, so it is untrusted: an id is ASCII digits
or it is left out (and the operator told so), and a selection is never larger
than :data:`BULK_LIMIT`, the most one web request acts on.
"""

from __future__ import annotations

from collections.abc import Iterable

from django import forms
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest

from django_jobretry.admin.base import parse_id
from django_jobretry.models import DeadLetter

#: The confirmation page pins the exact ids shown, in one field (a field per id
#: would hit DATA_UPLOAD_MAX_NUMBER_FIELDS beyond 1,000 items).
PINNED_FIELD = "jobretry_ids"
#: Most dead letters one admin request acts on (a few seconds: requeue_many revives them a chunk of
#: 2,000 per statement); beyond, `manage.py deadletters` paces the work.
BULK_LIMIT = 100_000
#: Columns the admin log needs; histories and arguments stay unread.
LOG_FIELDS = ("id", "job_id", "task_name", "reason")


def actor(request: HttpRequest) -> str:
    """The name recorded as "by" in requeue provenance and the service's logs."""
    return request.user.get_username()


def ids_in(values: Iterable[str]) -> tuple[list[int], int]:
    """The ids among posted values, sorted, and how many values were no id (a forged "²", "1e3")."""
    values = list(values)
    ids = {pk for value in values if (pk := parse_id(value)) is not None}
    invalid = sum(1 for value in values if parse_id(value) is None)
    return sorted(ids), invalid


def target_ids(request: HttpRequest, queryset: QuerySet[DeadLetter]) -> tuple[list[int], int]:
    """The ids the operator acted on, including ones that vanished since the page was drawn.

    Django narrows ``queryset`` to the ticked rows that still exist, which
    would hide a race; the ticked ids are read from the POST instead. Ids
    that exist but are outside ``queryset`` (the admin's visible set) are
    dropped; ids that no longer exist are kept, for the service to report.
    Also returns how many posted values were no id at all.
    """
    pinned = request.POST.get(PINNED_FIELD)
    across = forms.BooleanField(required=False).to_python(request.POST.get("select_across"))
    if pinned is None and across:
        return sorted(queryset.values_list("pk", flat=True)[: BULK_LIMIT + 1]), 0
    posted = pinned.split(",") if pinned is not None else request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
    # Django already dropped the forged ticks (and said so): only a pinned list can still hold some.
    ids, invalid = ids_in(value for value in posted if value)
    wanted = set(ids)
    visible = set(queryset.filter(pk__in=wanted).values_list("pk", flat=True))
    elsewhere = set(DeadLetter.objects.filter(pk__in=wanted - visible).values_list("pk", flat=True))
    return sorted(wanted - elsewhere), invalid


def summaries(ids: Iterable[int], fields: tuple[str, ...] = LOG_FIELDS) -> dict[int, DeadLetter]:
    """The dead letters of ``ids`` that still exist, with only ``fields`` loaded."""
    return {dead.pk: dead for dead in DeadLetter.objects.filter(pk__in=list(ids)).only(*fields)}
