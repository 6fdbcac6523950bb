"""The dead-letter admin: find, understand, then requeue or discard - nothing else.

Dead letters are read-only here: no add, no edit, no delete. They leave the
table only through the Requeue and Discard actions, which need their own
permissions (checked on the server, not just by hiding buttons) and go
through django_jobretry.deadletters, the guarded compare-and-swap service.

The sidebar's "Arguments" search (ArgumentSearch, and RetryingArgumentSearch
on the job list) is for users who may read arguments: ``?arguments=…`` is
read by deadletters/search.py (what one may type, and why it compares whole
values: jsonb containment on the GIN indexes of migration 0023). A filter
answers "does any row match?", so it reads values one guess at a time: users
who may not read arguments unredacted (admin/rendering.py
``can_filter_payload``) see no field, and the parameter in a URL is refused
with a 400 before any query (admin/base.py ``lookup_allowed``). A search
that cannot be read, or that PostgreSQL's jsonb would refuse, is the list's
error page, with a message saying what is wrong; nothing runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, override

from django.contrib import admin, messages
from django.contrib.admin.exceptions import DisallowedModelAdminLookup
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from django_jobretry.admin import audit, rendering
from django_jobretry.admin.base import ReadOnlyRecordAdmin, exact_id, requeued_times
from django_jobretry.admin.changelist import ErrorClassFilter, QueueFilter, TaskFilter
from django_jobretry.admin.dashboard import DashboardPage
from django_jobretry.deadletters.admin_pages import FailureGroupsPage, FingerprintFilter, MatchingActions
from django_jobretry.deadletters.admin_repair import RepairPage, recorded_repairs
from django_jobretry.deadletters.search import EXAMPLE, WHOLE_VALUES, InvalidSearch, containment
from django_jobretry.flows.service import flow_of
from django_jobretry.models import DeadLetter, DeadLetterSource, FlowState, Job
from django_jobretry.models.job import RETRYING


class ArgumentSearch(admin.ListFilter):
    """The sidebar's "Arguments" field; ``scope`` narrows the rows its index covers (jobs: retrying)."""

    title = "arguments"
    parameter_name = "arguments"
    template = "admin/django_jobretry/includes/argument_search.html"
    #: Rows the search reaches, matching the partial indexes' condition (None: every row).
    scope: Q | None = None
    help_text = f"Dead letters with an argument equal to this: {WHOLE_VALUES}."

    def __init__(self, request: HttpRequest, params: dict[str, Any], model: Any, model_admin: Any) -> None:
        super().__init__(request, params, model, model_admin)
        self.allowed = rendering.can_filter_payload(request)
        self.request = request
        self.text: str | None = None
        if self.parameter_name in params:
            if not self.allowed:
                raise DisallowedModelAdminLookup(f"Filtering by {self.parameter_name} not allowed")
            given = params.pop(self.parameter_name)
            self.text = given[-1] if isinstance(given, list) else given

    def has_output(self) -> bool:
        return self.allowed

    def expected_parameters(self) -> list[str | None]:
        return [self.parameter_name]

    def choices(self, changelist: Any) -> Iterator[dict[str, Any]]:
        """One "choice": what the form needs, the other filters kept as hidden fields."""
        kept = [
            (key, value)
            for key, values in changelist.params.items()
            for value in (values if isinstance(values, list) else [values])
            if key != self.parameter_name
        ]
        yield {"value": self.text or "", "kept": kept, "help": self.help_text, "example": EXAMPLE}

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.text is None:
            return queryset
        try:
            found = containment(self.text)
        except InvalidSearch as exc:
            messages.error(request, str(exc))
            raise IncorrectLookupParameters(str(exc)) from exc
        return queryset.filter(found if self.scope is None else found & self.scope)


class RetryingArgumentSearch(ArgumentSearch):
    """The job list's: retrying jobs only, the rows its partial GIN indexes hold."""

    scope = RETRYING
    help_text = f"Retrying jobs (no others) with an argument equal to this: {WHOLE_VALUES}."


class DeadLetterAdmin(DashboardPage, FailureGroupsPage, RepairPage, MatchingActions, ReadOnlyRecordAdmin):
    """Newest dead first, filterable, searchable; actions instead of edits."""

    # Five columns beside Django's two sidebars at 1280 px: the queue rides under the task,
    # attempts and requeues under the reason, so the last error keeps room to be read.
    list_display = ("id", "task", "reason_code", "died", "last_error_line")
    list_display_links = ("id", "task")
    list_filter = (
        ArgumentSearch,
        QueueFilter,
        TaskFilter,
        "reason",
        ErrorClassFilter,
        "source",
        FingerprintFilter,
    )
    date_hierarchy = "dead_at"
    search_fields = ("task_name", "last_error")
    search_help_text = "Task or error text; a number also matches a dead-letter id or job id."
    # Newest dead first, the (dead_at, id) index's order: the first page is an index scan.
    ordering = ("-dead_at", "-id")
    sortable_by = ("id", "died")
    actions = ("requeue_selected", "discard_selected")
    # What failed (task, reason, last error, attempts, died at) and the attempt history
    # lead the page, full width, above these (includes/failure.html): at 1280x900 the
    # error is on the first screen, and the history's message column has room to be read.
    fieldsets = (
        ("Job", {"fields": ("source", "job_id", "queue_name", "policy_name", "priority", "unique_key")}),
        # Dead letters from django-q2 (source "django_q2"); empty for this package's own jobs.
        ("External task", {"fields": ("external_id", "external_name", "external_group")}),
        ("Times", {"fields": ("enqueued_at_shown", "first_attempt_at_shown", "dead_at_shown")}),
        ("Requeue history", {"fields": ("requeue_count", "requeue_history_table")}),
    )
    readonly_fields = flatten_fieldsets(fieldsets)
    change_list_template = "admin/django_jobretry/deadletter/change_list.html"
    change_form_template = "admin/django_jobretry/deadletter/change_form.html"

    # -- list columns and detail renderings ---------------------------------------

    dead_at_shown = rendering.time_column("dead_at")

    @admin.display(description="reason", ordering="reason")
    def reason_code(self, obj: DeadLetter) -> SafeString:
        # The short code keeps the column narrow; the filter and detail page spell it out.
        return format_html(
            '{}<span class="jobretry-quiet">{} attempts</span>{}',
            rendering.breakable(obj.reason, "_"),
            self.attempts_display(obj),
            self.requeue_note(obj),
        )

    @admin.display(description="dead at", ordering="dead_at")
    def died(self, obj: DeadLetter) -> SafeString | str:
        # To the second: operators line this up with logs.
        return rendering.time_html(obj.dead_at)

    @admin.display(description="last error")
    def last_error_line(self, obj: DeadLetter) -> SafeString:
        return rendering.error_summary(obj.last_error_class, obj.last_error)

    def task_notes(self, obj: Job | DeadLetter) -> list[str]:
        notes = super().task_notes(obj)
        if isinstance(obj, DeadLetter) and obj.source != DeadLetterSource.JOBRETRY:
            notes.append(f"from {audit.source_label(obj.source)}")
        return notes

    def fate_of(self, pk: int) -> audit.Fate | None:
        return audit.fate_of_dead_letter(pk)

    def get_fieldsets(self, request: HttpRequest, obj: DeadLetter | None = None) -> Any:
        """The external task's ids only on dead letters that came from another system."""
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or obj.source == DeadLetterSource.JOBRETRY:
            return [(name, options) for name, options in fieldsets if name != "External task"]
        return fieldsets

    @override
    def detail_context(self, request: HttpRequest, obj: DeadLetter | None) -> dict[str, Any]:
        """What depends on the viewer (the arguments, the operator buttons), and the id in the heading.

        The heading names the dead letter's own id, the one `manage.py deadletters`
        takes; Django's would show only the model's repr, with the job id.
        """
        found: dict[str, Any] = {
            "can_requeue": self.has_requeue_permission(request, obj),
            "can_discard": self.has_discard_permission(request, obj),
            "can_repair": obj is not None and self.may_repair(request, obj),
        }
        if obj is not None:
            found["arguments"] = rendering.payload(request, obj.task_name, obj.args, obj.kwargs)
            found["repairs"] = recorded_repairs(request, obj.requeue_history)
            found["title"] = f"Dead letter {obj.pk}"
            found["subtitle"] = heading(obj)
            found["failure"] = self.failure(obj)
            found["attempts"] = rendering.attempt_history(obj.errors, obj.attempts)
            found["flow"] = self.blocked_flow(obj)
        return found

    def blocked_flow(self, dead: DeadLetter) -> dict[str, Any] | None:
        """The flow whose step this dead letter is, with its page: it waits for a requeue (flows/)."""
        flow = flow_of(dead.pk) if dead.flow_step_id is not None else None
        if flow is None:
            return None
        url = reverse(f"{self.admin_site.name}:django_jobretry_flow_change", args=[flow.pk])
        return {"flow": flow, "url": url, "open": flow.state in (FlowState.RUNNING, FlowState.BLOCKED)}

    def failure(self, dead: DeadLetter) -> dict[str, Any]:
        """The page's first section: what failed, why, and when, each on one line but the message."""
        error_class = dead.last_error_class
        return {
            "task": dead.task_name,
            "queue": dead.queue_name,
            "policy": dead.policy_name,
            "reason": dead.get_reason_display(),
            "rule": rendering.last_rule(dead.errors),
            "enqueue_trace": rendering.enqueue_trace(dead),
            "attempts": self.attempts_display(dead),
            "requeues": requeued_times(dead.requeue_count) if dead.requeue_count else "",
            "progress": self.progress_shown(dead) if dead.progress_done is not None else "",
            "died": rendering.time_html(dead.dead_at),
            "error_class": error_class,
            "error_name": error_class.rsplit(".", 1)[-1],
            "message": dead.last_error,
        }

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[DeadLetter], search_term: str
    ) -> tuple[QuerySet[DeadLetter], bool]:
        """Text search, plus exact dead-letter id or job id when the term is a number."""
        found, duplicates = super().get_search_results(request, queryset, search_term)
        if (number := exact_id(search_term)) is not None:
            found |= queryset.filter(pk=number) | queryset.filter(job_id=number)
        return found, duplicates

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The list, with its "Requeue / Discard all matching…" links (deadletters/admin_pages.py)."""
        context = {"jobretry_matching_links": self.matching_links(request), **(extra_context or {})}
        return super().changelist_view(request, context)

    def get_urls(self) -> list[URLPattern]:
        # Before the defaults, whose "<path:object_id>/" would swallow these.
        return [
            *self.dashboard_urls(),
            *self.groups_urls(),
            *self.repair_urls(),
            *self.matching_urls(),
            *self.action_urls(),
            *super().get_urls(),
        ]


def heading(dead: DeadLetter) -> str:
    """The detail page's subtitle: task, where it ran, how it died."""
    if dead.source == DeadLetterSource.JOBRETRY:
        ran = f"job {dead.job_id}"
    else:
        ran = f"{audit.source_label(dead.source)} task {dead.external_id or '?'}"
    return f"{dead.task_name} · {ran} · {dead.get_reason_display()}"
