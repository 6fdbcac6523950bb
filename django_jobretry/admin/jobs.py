"""The job admin: read-only, because jobs change state only through the services.

Editing a status or an attempt count by hand would bypass the lease and
compare-and-swap rules the worker relies on (docs/design.md), so this admin has no
add, change or delete at all - it is for looking: what is queued, what ran,
how each attempt ended, and where a requeued job came from.
"""

from __future__ import annotations

from typing import Any, override

from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from django_jobretry.admin import rendering, timestamps
from django_jobretry.admin.base import ReadOnlyRecordAdmin, exact_id
from django_jobretry.admin.changelist import QueueFilter, TaskFilter
from django_jobretry.models import Job


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
    actions = None
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
