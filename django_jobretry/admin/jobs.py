"""The job admin: read-only, because jobs change state only through the services.

Editing a status or an attempt count by hand would bypass the lease and
compare-and-swap rules the worker relies on (docs/design.md), so this admin has no
add, change or delete at all - it is for looking: what is queued, what ran,
how each attempt ended, and where a requeued job came from. The one action,
Cancel, needs its own permission and goes through services/cancel.py.
"""

from __future__ import annotations

from typing import Any, override

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE
from django.contrib.admin.utils import flatten_fieldsets
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from django_jobretry.admin import audit, rendering, timestamps
from django_jobretry.admin.base import ReadOnlyRecordAdmin, exact_id, holds
from django_jobretry.admin.changelist import QueueFilter, TaskFilter
from django_jobretry.models import Job
from django_jobretry.services.cancel import cancel_jobs

#: Most jobs one admin request cancels; beyond, `manage.py canceljobs` takes ids.
CANCEL_LIMIT = 10_000


class JobAdmin(ReadOnlyRecordAdmin):
    """Jobs newest first, filterable by status, queue and task; nothing editable."""

    list_display = (
        "id",
        "status",
        "task",
        "queue_name",
        "attempts_display",
        "run_at_shown",
        "requeues",
    )
    list_display_links = ("id", "task")
    list_filter = ("status", QueueFilter, TaskFilter)
    search_fields = ("task_name",)
    search_help_text = "Task name, or a job id."
    ordering = ("-id",)
    sortable_by = ("id", "run_at_shown")
    actions = ("cancel_selected",)
    fieldsets = (
        (None, {"fields": ("task_name", "queue_name", "policy_name", "status", "priority", "unique_key")}),
        (
            "Attempts",
            {"fields": ("attempts_display", "run_at_shown", "lease_owner", "lease_expires_at_shown")},
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
        ("Attempt history", {"fields": ("attempt_history",)}),
        ("Requeue history", {"fields": ("requeue_count", "requeue_history_table")}),
    )
    readonly_fields = flatten_fieldsets(fieldsets)
    change_form_template = "admin/django_jobretry/job/change_form.html"

    # Timestamps through the guard (admin/timestamps.py): a run_at of 'infinity' must not break a page.
    run_at_shown = timestamps.column("run_at", sortable=True)
    lease_expires_at_shown = timestamps.column("lease_expires_at")
    started_at_shown = timestamps.column("started_at")
    finished_at_shown = timestamps.column("finished_at")

    @override
    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Job | None = None,
    ) -> HttpResponse:
        """Adds the arguments, which depend on the viewer's rights."""
        if obj is not None:
            context["arguments"] = rendering.payload(request, obj.task_name, obj.args, obj.kwargs)
        return super().render_change_form(request, context, add, change, form_url, obj)

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
        result = cancel_jobs([row.pk for row in rows], actor=request.user.get_username())
        audit.log(
            request,
            [
                (row, CHANGE, f"Cancelled: dead letter {result.dead_letters[row.pk]}.")
                if row.pk in result.dead_letters
                else (row, CHANGE, "Cancel requested: its worker stops it.")
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
