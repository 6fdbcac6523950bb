"""A bulk requeue or discard: which dead letters the request means, and "are you sure?" before it acts.

Which dead letters: the ticked rows, "select all", or the ids a confirmation
page pinned. Everything here is read from a POST, so it is untrusted: an id
is ASCII digits or it is left out (and the operator told so), and a
selection is never larger than :data:`BULK_LIMIT`, the most one web request
acts on.

A bulk action is where a tired operator does the most damage in one click:
requeueing 4,000 dead letters of the wrong task floods the workers, and a
discard cannot be undone. So both ask first, the way Django's own "delete
selected" does, and the page says what the click would do in numbers - how
many, of which tasks, how many go back to django-q2 rather than becoming
jobs, how many a live job's unique key would refuse - with the first
:data:`SHOWN` listed. It shows ids, tasks, queues, reasons, times and error
lines; never arguments.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.contrib.admin import helpers
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.translation import ngettext

from django_jobretry import deadletters
from django_jobretry.admin import audit, rendering
from django_jobretry.admin.base import parse_id
from django_jobretry.flows.service import cancelled_by_discard
from django_jobretry.models import DeadLetter, DeadLetterSource

#: The confirmation page pins the exact ids shown, in one field (a field per id
#: would hit DATA_UPLOAD_MAX_NUMBER_FIELDS beyond 1,000 items).
PINNED_FIELD = "jobretry_ids"
#: Most dead letters one admin request acts on (a few seconds: requeue_many revives them a chunk of
#: 2,000 per statement); beyond, `manage.py deadletters` paces the work.
BULK_LIMIT = 100_000
#: Columns the admin log needs; histories and arguments stay unread.
LOG_FIELDS = ("id", "job_id", "task_name", "reason")
#: Dead letters listed by name on the page; the rest are counted.
SHOWN = 100
#: Tasks counted by name; the others are summed.
TASKS_SHOWN = 10
#: Columns the page lists.
SHOWN_FIELDS = (
    "id",
    "job_id",
    "task_name",
    "reason",
    "queue_name",
    "dead_at",
    "last_error",
    "last_error_class",
)
TEMPLATE = "admin/django_jobretry/deadletter/confirmation.html"


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


@dataclass
class Counts:
    """What a requeue or discard of a set of dead letters would do, counted in SQL."""

    total: int
    by_task: list[tuple[str, int]] = field(default_factory=list)
    other_tasks: int = 0
    #: (system, count): django-q2 dead letters are resubmitted to django-q2, never made jobs.
    elsewhere: list[tuple[str, int]] = field(default_factory=list)
    #: Requeues a live job's unique key would refuse (predicted; the service decides).
    conflicts: int = 0

    @property
    def new_jobs(self) -> int:
        return self.total - sum(count for _, count in self.elsewhere) - self.conflicts


def count(ids: list[int], *, requeue: bool) -> Counts:
    """The counts for ``ids`` (at most BULK_LIMIT of them: the caller checked)."""
    rows = DeadLetter.objects.filter(pk__in=ids)
    tasks = list(rows.values_list("task_name").annotate(n=Count("id")).order_by("-n", "task_name"))
    counts = Counts(total=sum(n for _, n in tasks), by_task=tasks[:TASKS_SHOWN])
    counts.other_tasks = sum(n for _, n in tasks[TASKS_SHOWN:])
    if requeue:
        others = rows.exclude(source=DeadLetterSource.JOBRETRY).values_list("source").annotate(n=Count("id"))
        counts.elsewhere = [(audit.source_label(source), n) for source, n in others.order_by("source")]
        keyed = rows.filter(source=DeadLetterSource.JOBRETRY, unique_key__isnull=False)
        # In id order, the order requeue_many takes them: the first of two with one key wins.
        counts.conflicts = len(deadletters.predicted_conflicts(keyed.only("id", "unique_key").order_by("pk")))
    return counts


def cancelled_steps(ids: list[int]) -> list[tuple[int, list[str]]]:
    """Of the first :data:`SHOWN` flow steps among ``ids``: each one's waiting steps a discard cancels."""
    steps = DeadLetter.objects.filter(pk__in=ids, flow_step__isnull=False).order_by("pk")
    found = cancelled_by_discard(list(steps.values_list("pk", flat=True)[:SHOWN]))
    return [(pk, names) for pk, names in sorted(found.items()) if names]


def _plural(verb: str, total: int) -> tuple[str, str, str]:
    """The question, what follows, and the button's label."""
    noun = ngettext("dead letter", "dead letters", total)
    them = ngettext("it", "them", total)
    if verb == "requeue":
        what = ngettext(
            "It becomes a new ready job with its history and a record of who requeued it",
            "Each becomes a new ready job with its history and a record of who requeued it",
            total,
        )
    else:
        what = ngettext(
            "It is deleted for good and will not run again",
            "They are deleted for good and will not run again",
            total,
        )
    done = "requeued" if verb == "requeue" else "discarded"
    follows = f"{what}; the admin log records who {done} {them}."
    return f"{verb.capitalize()} {total} {noun}?", follows, f"Yes, {verb} {them}"


def page(
    model_admin: Any,
    request: HttpRequest,
    *,
    verb: str,
    ids: list[int],
    hidden: dict[str, str],
    form_url: str,
    cancel_url: str,
    scope: list[tuple[str, str]] | None = None,
    refused: str = "",
) -> TemplateResponse:
    """The page: the question, the counts, the first :data:`SHOWN` dead letters, Yes and No.

    ``scope`` is the filter of an "everything matching" action (None for a
    selection); ``refused`` replaces the question when the action cannot run here.
    """
    listed = DeadLetter.objects.filter(pk__in=ids[:SHOWN]).only(*SHOWN_FIELDS)
    shown = [] if refused else list(listed.order_by("-dead_at", "-pk"))
    counts = count(ids, requeue=verb == "requeue") if ids and not refused else Counts(total=0)
    question, follows, button = _plural(verb, counts.total)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Are you sure?",
        "subtitle": None,
        "opts": model_admin.opts,
        "verb": verb,
        "question": question,
        "follows": follows,
        "button": button,
        "counts": counts,
        "items": [
            (
                dead,
                rendering.time_text(dead.dead_at),
                rendering.error_summary(dead.last_error_class, dead.last_error),
            )
            for dead in shown
        ],
        "count": counts.total,
        # A discarded flow step cancels the steps waiting on it (flows/service.py).
        "cancels": cancelled_steps(ids) if verb == "discard" and ids and not refused else [],
        "more": max(counts.total - len(shown), 0),
        "scope": scope,
        "refused": refused,
        "hidden_fields": hidden,
        "form_url": form_url,
        "cancel_url": cancel_url,
        "media": model_admin.media,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, TEMPLATE, context)
