"""The job admin: read-only, because jobs change state only through the services.

Editing a status or an attempt count by hand would bypass the lease and
compare-and-swap rules the worker relies on (docs/design.md), so this admin has no
add, change or delete at all - it is for looking: what is queued, what ran,
how each attempt ended, and where a requeued job came from. The one action,
Cancel, needs its own permission and goes through jobs/recovery.py.

A job waiting for its next attempt is ready in the table, but to an operator
it is failing: the list shows it as "retrying (attempt 3 of 4, next at
...)" with its last error, and the status filter has "retrying" (the same
rows as ``Job.objects.retrying()``).
"""

from __future__ import annotations

import json
from typing import Any, override

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import flatten_fieldsets
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Left
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from django_jobretry.admin import audit, rendering
from django_jobretry.admin.base import ReadOnlyRecordAdmin, exact_id, holds
from django_jobretry.admin.changelist import QueueFilter, TaskFilter
from django_jobretry.deadletters.admin import RetryingArgumentSearch
from django_jobretry.deadletters.admin_repair import recorded_repairs
from django_jobretry.holds import why_held
from django_jobretry.holds.admin import HeldFilter
from django_jobretry.jobs.recovery import cancel_jobs
from django_jobretry.models import Job, JobStatus
from django_jobretry.models.job import RETRYING

#: Most jobs one admin request cancels; beyond, `manage.py canceljobs` takes ids.
CANCEL_LIMIT = 10_000
#: The status filter's choices: "ready" is a job never attempted, "retrying" one waiting
#: for another attempt (the model's RETRYING, as Job.objects.retrying()), so the two never
#: overlap. Conditions, not JobQuerySet methods: the list's queryset is not always one.
STATES: dict[str, tuple[str, Q]] = {
    "ready": ("Ready (not attempted yet)", Q(status=JobStatus.READY, attempts=0)),
    "retrying": ("Retrying (waiting for its next attempt)", RETRYING),
    "running": ("Running", Q(status=JobStatus.RUNNING)),
    "succeeded": ("Succeeded", Q(status=JobStatus.SUCCEEDED)),
    "waiting": ("Waiting for its parents (a workflow's step)", Q(status=JobStatus.WAITING)),
}
#: Characters of the last error message read for the list (its first line is shown).
ERROR_CHARS = 500
# The last entry of the attempt history, read in SQL: the list never loads the history itself.
_LAST_ERROR_CLASS = KeyTextTransform("error_class", KeyTransform(-1, "errors"))
_LAST_ERROR_MESSAGE = Left(KeyTextTransform("message", KeyTransform(-1, "errors")), ERROR_CHARS)


class StatusFilter(admin.SimpleListFilter):
    """Ready, retrying, running, succeeded or waiting; ``?status=retrying`` is what the dashboard links to."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(value, label) for value, (label, _) in STATES.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        if value is None:
            return queryset
        if value not in STATES:  # Django's answer to a lookup it cannot apply: "?e=1"
            raise IncorrectLookupParameters(f"no such status: {value!r}")
        return queryset.filter(STATES[value][1])


def state_words(job: Job) -> tuple[str, str]:
    """The status as an operator reads it, and its detail: a ready job that failed before is retrying."""
    if job.status == JobStatus.READY and job.attempts > 0:
        when = rendering.clock(job.run_at)
        return "retrying", f"attempt {job.attempts + 1} of {job.max_attempts}, next at {when}"
    if job.status == JobStatus.READY or not job.attempts:
        return job.status, ""
    return job.status, f"attempt {job.attempts} of {job.max_attempts}"


def state(job: Job) -> SafeString | str:
    """:func:`state_words` for the list: "retrying (attempt 3 of 4, next at 02:15:07)" stands out."""
    word, detail = state_words(job)
    if word == "retrying":
        return format_html('<span class="jobretry-retrying">retrying</span> ({})', detail)
    if detail:
        return format_html('{}<span class="jobretry-quiet">{}</span>', word, detail)
    return word


def kept_result(request: HttpRequest, job: Job) -> dict[str, Any] | None:
    """The Result section of a succeeded job (docs/results.md): its value to holders of ``view_job_payload``.

    A result may be as personal as arguments, but PAYLOAD_REDACTOR is given
    arguments only: while one is configured no result is shown (fail closed),
    as arguments are filtered by no one then. Whether one was kept is no payload.
    """
    if job.status != JobStatus.SUCCEEDED:
        return None
    # NULL is none kept; a kept None is JSON null: Python reads both as None.
    kept = Job.objects.filter(pk=job.pk, return_value__isnull=False).exists()
    section: dict[str, Any] = {"kept": kept, "permission_name": rendering.PAYLOAD_PERMISSION_NAME}
    if not kept:
        return section
    if not rendering.can_view_payload(request):
        return {**section, "hidden": True}
    if not rendering.can_filter_payload(request):
        return {**section, "redacting": True}
    return {**section, "json": json.dumps(job.return_value, indent=2, ensure_ascii=False, default=str)}


class JobAdmin(ReadOnlyRecordAdmin):
    """Jobs newest first, filterable by status, queue and task; nothing editable."""

    # Queue under the task, attempts in the status: what fits beside Django's sidebars at 1280 px.
    list_display = ("id", "state_display", "task", "run_at_shown", "last_error")
    list_display_links = ("id", "task")
    list_filter = (RetryingArgumentSearch, StatusFilter, HeldFilter, QueueFilter, TaskFilter)
    search_fields = ("task_name",)
    search_help_text = "Task name, or a job id."
    ordering = ("-id",)
    sortable_by = ("id", "run_at_shown")
    actions = ("cancel_selected",)
    fieldsets = (
        (None, {"fields": ("task_name", "queue_name", "policy_name", "status", "priority", "unique_key")}),
        (
            "Attempts",
            {
                "fields": (
                    *("attempts_display", "progress_shown", "run_at_shown", "held_because"),
                    *("lease_owner", "lease_expires_at_shown"),
                )
            },
        ),
        (
            "Times",
            {
                "fields": (
                    "enqueued_at_shown",
                    "first_attempt_at_shown",
                    "started_at_shown",
                    "finished_at_shown",
                )
            },
        ),
        ("Attempt history", {"fields": ("enqueue_trace", "attempt_history")}),
        ("Requeue history", {"fields": ("requeue_count", "requeue_history_table")}),
    )
    readonly_fields = flatten_fieldsets(fieldsets)
    change_form_template = "admin/django_jobretry/job/change_form.html"

    # Timestamps to the second (admin/rendering.py).
    run_at_shown = rendering.time_column("run_at", sortable=True)
    lease_expires_at_shown = rendering.time_column("lease_expires_at")
    started_at_shown = rendering.time_column("started_at")
    finished_at_shown = rendering.time_column("finished_at")

    @admin.display(description="held")
    def held_because(self, obj: Job) -> str:
        """What keeps a ready job from being claimed now: a pause or its task's breaker (docs/outages.md)."""
        why = why_held(obj)
        return f"Held: {why}" if why else "-"

    @admin.display(description="status")
    def state_display(self, obj: Job) -> SafeString:
        return format_html("{}{}{}", state(obj), self.progress_note_cell(obj), self.requeue_note(obj))

    @admin.display(description="last error")
    def last_error(self, obj: Job) -> SafeString | str:
        """The last failed attempt's class and first line; never the arguments."""
        message = getattr(obj, "jobretry_last_error_message", None)
        error_class = getattr(obj, "jobretry_last_error_class", None)
        if not (message or error_class):
            return ""
        return rendering.error_summary(error_class or "", message or "")

    def list_page(self, rows: QuerySet[Any]) -> QuerySet[Any]:
        """The last error of the page's jobs, read in SQL from the history the list leaves unread."""
        annotated: QuerySet[Any] = rows.annotate(
            jobretry_last_error_class=_LAST_ERROR_CLASS, jobretry_last_error_message=_LAST_ERROR_MESSAGE
        )
        return annotated

    def fate_of(self, pk: int) -> audit.Fate | None:
        return audit.fate_of_job(pk)

    def get_fieldsets(self, request: HttpRequest, obj: Job | None = None) -> Any:
        """The enqueue's trace only on a job that has one (docs/tracing.md): most jobs are not traced."""
        fieldsets = super().get_fieldsets(request, obj)
        if obj is not None and rendering.enqueue_trace(obj):
            return fieldsets
        return [
            (name, {**options, "fields": [f for f in options["fields"] if f != "enqueue_trace"]})
            for name, options in fieldsets
        ]

    @override
    def detail_context(self, request: HttpRequest, obj: Job | None) -> dict[str, Any]:
        """The arguments and result, which depend on the viewer's rights, and the job named in the heading."""
        if obj is None:
            return {}
        word, detail = state_words(obj)
        return {
            "arguments": rendering.payload(request, obj.task_name, obj.args, obj.kwargs),
            "result": kept_result(request, obj),
            "repairs": recorded_repairs(request, obj.requeue_history),
            "title": f"Job {obj.pk}",
            "subtitle": f"{obj.task_name} · {word}" + (f" ({detail})" if detail else ""),
        }

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        """Task-name search, plus the exact job id when the term is a number."""
        found, duplicates = super().get_search_results(request, queryset, search_term)
        if (number := exact_id(search_term)) is not None:
            found |= queryset.filter(pk=number)
        return found, duplicates

    def has_cancel_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return holds(request, self.opts, "cancel")

    @admin.action(permissions=["cancel"], description="Cancel selected jobs")
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        """Ready jobs become "cancelled" dead letters; running ones are stopped by their worker."""
        if not self.has_cancel_permission(request):  # Django checks too: check again
            raise PermissionDenied
        rows = list(queryset.only("id", "task_name", "status")[: CANCEL_LIMIT + 1])
        if len(rows) > CANCEL_LIMIT:
            message = f"More than {CANCEL_LIMIT:,} jobs selected: nothing was done. Narrow the list."
            self.message_user(request, message, messages.ERROR)
            return
        result = cancel_jobs([row.pk for row in rows], actor=audit.actor(request))
        audit.log(
            request,
            [
                (
                    row,
                    CHANGE,
                    f"Cancelled: dead letter {result.dead_letters[row.pk]}.",
                    f"Job {row.pk} cancelled: dead letter {result.dead_letters[row.pk]} ({row.task_name})",
                )
                if row.pk in result.dead_letters
                else (
                    row,
                    CHANGE,
                    "Cancel requested: its worker stops it.",
                    f"Job {row.pk} cancel requested ({row.task_name})",
                )
                for row in rows
                if row.pk in result.dead_letters or row.pk in result.stopping
            ],
        )
        parts = [f"{len(result.dead_letters)} cancelled (now dead letters)."]
        if result.stopping:
            parts.append(f"{len(result.stopping)} running: their workers stop them within a heartbeat.")
        if result.not_live:
            parts.append(f"{len(result.not_live)} had already finished or died.")
        level = messages.WARNING if result.not_live else messages.SUCCESS
        self.message_user(request, " ".join(parts), level)
