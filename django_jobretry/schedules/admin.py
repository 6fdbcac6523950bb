"""The schedules page: where each periodic schedule stands, and pause, resume or run it now.

Read-only like the other pages: a schedule is declared in code and
settings, and its row is written by the workers (schedules/runs.py), so
nothing here adds, edits or deletes one. What an operator may do goes
through schedules/rows.py, as actions behind their own permissions
(schedules/admin_actions.py). The columns come from the same read model as
`jobstatus` and `manage.py schedules` (schedules/status.py): the last run's
outcome is read with the rows, in one query, whatever the number of
schedules. So does the dashboard's Schedules panel (:func:`schedules_panel`).

A row whose name this deploy does not declare is left from an older deploy:
nothing runs it, and it says so. A schedule's arguments are shown, on its
detail page only, to holders of ``view_job_payload``, after the
project's PAYLOAD_REDACTOR, like a job's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, override

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.admin.views.main import ChangeList
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet, Value
from django.db.models.functions import Now
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from django_jobretry.admin import rendering
from django_jobretry.admin.base import NoWritesAdmin
from django_jobretry.admin.base import holds as may
from django_jobretry.display import humanize_delay
from django_jobretry.features import Page
from django_jobretry.models import Schedule
from django_jobretry.schedules import ScheduleSpec, declared, status
from django_jobretry.schedules.admin_actions import ScheduleActions
from django_jobretry.schedules.status import LAST_RUN, NOT_DECLARED, last_run, utc, zoned

#: The longest schedule name (the primary key's length): a longer one in a URL is no schedule.
NAME_CHARS = Schedule._meta.get_field("name").max_length or 200


class StateFilter(admin.SimpleListFilter):
    """Paused, active, or left from an older deploy (this one does not declare it)."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("active", "Active"), ("paused", "Paused"), ("undeclared", NOT_DECLARED.capitalize())]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> QuerySet[Schedule]:
        names = list(declared())
        if self.value() == "active":
            return queryset.filter(paused_at=None, name__in=names)
        if self.value() == "paused":
            return queryset.exclude(paused_at=None)
        if self.value() == "undeclared":
            return queryset.exclude(name__in=names)
        return queryset


class DeclaredChangeList(ChangeList):
    """The list, each row of the page carrying its declaration: the settings are read once a page."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        specs = declared()
        for row in self.result_list:
            row.jobretry_spec = specs.get(row.name)


class ScheduleAdmin(ScheduleActions, NoWritesAdmin):
    """One row per schedule, by name; nothing editable, three actions."""

    list_display = ("schedule", "next_run", "last_run_shown", "last_success", "slots", "paused")
    list_display_links = ("schedule",)
    list_filter = (StateFilter,)
    search_fields = ("name", "task_name")
    search_help_text = "A part of the schedule's name or of its task's."
    sortable_by = ("schedule", "next_run")
    list_per_page = 100
    actions = ("pause_selected", "resume_selected", "run_selected")
    fields = (
        *("name", "task_name", "cadence", "declaration", "next_run", "last_run_shown"),
        *("last_success", "slots", "paused", "declared_at_shown"),
    )
    readonly_fields = fields
    change_form_template = "admin/django_jobretry/job/change_form.html"

    class Media:
        css = {"all": ("django_jobretry/admin.css",)}

    declared_at_shown = rendering.time_column("declared_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Schedule]:
        """The rows with their last run, the database's now, and whether this user may open the run.

        The rights ride on the rows because a column sees only its row, and the
        admin instance is shared by every request.
        """
        due = ExpressionWrapper(Q(next_slot__lte=Now()), output_field=BooleanField())
        user = request.user
        return (
            super()
            .get_queryset(request)
            .annotate(
                jobretry_due=due,
                jobretry_now=Now(),
                jobretry_view_job=Value(user.has_perm(rendering.VIEW_JOB)),
                jobretry_view_deadletter=Value(user.has_perm(rendering.VIEW_DEAD_LETTER)),
                **LAST_RUN,
            )
        )

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        """The state filter's own parameter only, never with a NUL: anything else is a 400."""
        return "\x00" not in value and lookup == StateFilter.parameter_name

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        """A schedule by name; a name PostgreSQL could not hold (a NUL) is "not found", never a 500."""
        if "\x00" in object_id or len(object_id) > NAME_CHARS:
            return None
        return super().get_object(request, object_id, from_field)

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return DeclaredChangeList

    @staticmethod
    def spec(obj: Schedule) -> ScheduleSpec | None:
        """The declaration of ``obj`` in this deploy: read once per list page, else now."""
        if hasattr(obj, "jobretry_spec"):
            spec: ScheduleSpec | None = obj.jobretry_spec
            return spec
        return declared().get(obj.name)

    @admin.display(description="schedule", ordering="name")
    def schedule(self, obj: Schedule) -> SafeString:
        """The name, then its task and cadence quieter; a row no deploy declares says so in red."""
        notes = [obj.task_name, obj.cadence]
        spec = self.spec(obj)
        if spec is not None and spec.cadence.describe() != obj.cadence:
            notes.append(f"this deploy: {spec.cadence.describe()}, once one of its workers starts")
        warning = format_html('<span class="jobretry-dead">{}</span>', NOT_DECLARED) if spec is None else ""
        return format_html(
            '<span class="jobretry-task-name">{}</span>{}{}',
            obj.name,
            format_html_join("", '<span class="jobretry-quiet">{}</span>', ((note,) for note in notes)),
            warning,
        )

    @admin.display(description="next run", ordering="next_slot")
    def next_run(self, obj: Schedule) -> SafeString:
        """In the schedule's own time zone (where its cron is read), and in UTC below."""
        spec = self.spec(obj)
        zone = spec.cadence.tz if spec is not None else "UTC"
        times = [utc(obj.next_slot)] if zone == "UTC" else [zoned(obj.next_slot, zone), utc(obj.next_slot)]
        lines: list[SafeString | str] = [_moment(text) for text in times]
        if obj.paused_at is not None:
            lines.append("paused: slots due meanwhile are decided at the resume")
        elif obj.jobretry_due:  # type: ignore[attr-defined]
            lines.append("due: the next look of a worker runs it")
        return format_html(
            "{}{}",
            lines[0],
            format_html_join("", '<span class="jobretry-quiet">{}</span>', ((line,) for line in lines[1:])),
        )

    @admin.display(description="last run")
    def last_run_shown(self, obj: Schedule) -> SafeString | str:
        """The last run's slot and what became of it, linked to its job, or to its dead letter if it died."""
        run = last_run(obj)
        if run.job_id is None:
            return str(run)
        if run.dead_letter_id is not None:
            model, pk, label = "deadletter", run.dead_letter_id, f"dead letter {run.dead_letter_id}"
        else:
            model, pk, label = "job", run.job_id, f"job {run.job_id}"
        # A job gone from the tables still links: its page says what became of it (admin/audit.py).
        if getattr(obj, f"jobretry_view_{model}", False):
            url = reverse(f"admin:django_jobretry_{model}_change", args=[pk])
            label = format_html('<a href="{}">{}</a>', url, label)
        return format_html(
            '{}<span class="jobretry-quiet">{}: {}</span>', rendering.time_html(run.slot), label, str(run)
        )

    @admin.display(description="last success")
    def last_success(self, obj: Schedule) -> SafeString | str:
        if obj.last_success_at is None:
            return "never"
        age = max(obj.jobretry_now - obj.last_success_at, timedelta(0))  # type: ignore[attr-defined]
        return format_html(
            '{}<span class="jobretry-quiet">{} ago</span>',
            rendering.time_html(obj.last_success_at),
            humanize_delay(age),
        )

    @admin.display(description="slots: runs / skipped / missed / refused")
    def slots(self, obj: Schedule) -> str:
        return f"{obj.runs:,} / {obj.skipped:,} / {obj.missed:,} / {obj.refused:,}"

    @admin.display(description="paused")
    def paused(self, obj: Schedule) -> SafeString | str:
        """By whom, why and since when; "-" when it runs."""
        if obj.paused_at is None:
            return "-"
        return format_html(
            '<span class="jobretry-dead">paused</span> by {}'
            '<span class="jobretry-quiet">{}</span><span class="jobretry-quiet">since {}</span>',
            obj.paused_by or "?",
            obj.pause_reason or "no reason given",
            rendering.time_html(obj.paused_at),
        )

    @admin.display(description="declaration")
    def declaration(self, obj: Schedule) -> str:
        """Where it is declared and its options; the arguments have their own fieldset."""
        spec = self.spec(obj)
        if spec is None:
            return f"{NOT_DECLARED}: nothing runs it (its row is left from a deploy that declared it)"
        queue = spec.queue_name or "the task's own"
        return (
            f"{spec.source}; queue: {queue}; overlap {spec.overlap.value}; catch_up {spec.catch_up.value} "
            f"(limit {spec.catch_up_limit}); retries until the next slot: {spec.retry_until_next_slot}"
        )

    @override
    def detail_context(self, request: HttpRequest, obj: Schedule | None) -> dict[str, Any]:
        """The arguments, for those who may see them (redacted), and the name in the heading."""
        if obj is None:
            return {}
        found = {"title": f"Schedule {obj.name}", "subtitle": f"{obj.task_name} · {obj.cadence}"}
        spec = self.spec(obj)
        if spec is not None:
            found["arguments"] = rendering.payload(
                request, spec.task_name, list(spec.args), dict(spec.kwargs)
            )
        return found


def _moment(text: str) -> SafeString:
    """ "2026-12-08 03:00:00 CET" marked up to wrap between the date and the time, never inside either."""
    day, _, clock = text.partition(" ")
    return format_html(
        '<span class="jobretry-date">{}</span> <span class="jobretry-time">{}</span>', day, clock
    )


# -- the dashboard's Schedules panel (features.py) ----------------------------------------------


def schedules_panel(page: Page) -> dict[str, Any] | None:
    """Schedules that are late, failing or paused, for users who may view schedules; None otherwise."""
    site = page.site
    if not may(page.request, Schedule._meta, "view"):
        return None
    now, states = status.listing()
    rows = []
    for state in states:
        found = status.troubles(state, now)
        if found:
            rows.append(
                {
                    "state": state,
                    "troubles": [status.TROUBLES[key] for key in found],
                    "next": status.utc(state.next_slot) if state.next_slot else "-",
                    "success": _success(state, now),
                    "last": str(state.last),
                    "paused_since": rendering.since(state.paused_at, now),
                    "url": reverse(f"{site}:django_jobretry_schedule_change", args=[quote(state.name)])
                    if state.has_row
                    else None,
                }
            )
    return {
        "rows": rows,
        "total": len(states),
        "url": reverse(f"{site}:django_jobretry_schedule_changelist"),
    }


def _success(state: status.ScheduleState, now: datetime) -> SafeString | str:
    if state.last_success_at is None:
        return "never"
    moment, age = rendering.since(state.last_success_at, now)
    return format_html("{} ({} ago)", moment, age)
