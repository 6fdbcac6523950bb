"""The workers page: every registered `runworker` process, live or lost, read-only.

Rows are written only by the workers' own heartbeats (console/workers.py);
deleting one here would not stop its worker, which would write it back at
its next beat, so nothing can be added, changed or deleted. Live or lost is
computed by the database clock in the query, like everywhere else, so the
page and `manage.py jobstatus` agree. Nothing here touches a job, let alone
its arguments. Every column is one Python can load: the table refuses
times, leases and queues a worker never writes (models/worker_process.py).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import DurationField, ExpressionWrapper, F, QuerySet
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Now
from django.forms import ModelForm
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from django_jobretry.admin import rendering
from django_jobretry.admin.base import NoWritesAdmin
from django_jobretry.console.workers import queue_list
from django_jobretry.display import humanize_delay
from django_jobretry.models import WorkerProcess
from django_jobretry.models.worker_process import IS_LIVE, LIVE

#: The URL filters of the list: the status filter's and the host filter's own parameters.
FILTER_LOOKUPS = frozenset({"status", "host__exact", "host__isnull"})


class StatusFilter(admin.SimpleListFilter):
    """Live or lost, by the database clock."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("live", "Live"), ("lost", "Lost (no heartbeat for longer than its lease)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[WorkerProcess]) -> QuerySet[WorkerProcess]:
        if self.value() == "live":
            return queryset.filter(LIVE)
        if self.value() == "lost":
            return queryset.exclude(LIVE)
        return queryset


def _age(name: str) -> ExpressionWrapper[CombinedExpression]:
    """Now minus column ``name`` on the database clock."""
    return ExpressionWrapper(Now() - F(name), output_field=DurationField())


class WorkerProcessAdmin(NoWritesAdmin):
    """Live workers first, then lost ones; nothing editable."""

    # Six columns, the id wrapping at its colons: what fits beside Django's sidebars at 1280 px.
    list_display = ("status", "worker", "queue_list", "running", "up", "heartbeat")
    list_display_links = ("worker",)
    list_filter = (StatusFilter, "host")
    search_fields = ("worker_id",)
    search_help_text = "A part of the worker id (host:pid:random), as in a job's lease owner."
    sortable_by = ()
    list_per_page = 100
    fields = (
        "worker_id",
        "host",
        "pid",
        "queue_list",
        "concurrency",
        "pool",
        "version",
        "lease_shown",
        "started_at_shown",
        "last_heartbeat_at_shown",
        "running_jobs",
    )
    readonly_fields = fields

    class Media:
        css = {"all": ("django_jobretry/admin.css",)}

    started_at_shown = rendering.time_column("started_at")
    last_heartbeat_at_shown = rendering.time_column("last_heartbeat_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[WorkerProcess]:
        # Annotated before the ordering applies: the order is by ``live``.
        queryset = WorkerProcess.objects.annotate(
            live=IS_LIVE, heartbeat_age=_age("last_heartbeat_at"), up_for=_age("started_at")
        )
        return queryset.order_by(*self.get_ordering(request))

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        return ("-live", "started_at", "id")

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> type[ModelForm[Any]]:
        kwargs["help_texts"] = {"lease_shown": WorkerProcess._meta.get_field("lease").help_text}
        return super().get_form(request, obj, change, **kwargs)

    @admin.display(description="status")
    def status(self, obj: WorkerProcess) -> SafeString | str:
        return "live" if obj.live else format_html('<span class="jobretry-dead">{}</span>', "lost")  # type: ignore[attr-defined]

    @admin.display(description="worker")
    def worker(self, obj: WorkerProcess) -> SafeString:
        """The id (host:pid:random), then its pool and version in small print."""
        return format_html(
            '{}<span class="jobretry-quiet">{} pool, version {}</span>',
            rendering.breakable(obj.worker_id, ":"),
            obj.pool,
            obj.version,
        )

    @admin.display(description="running")
    def running(self, obj: WorkerProcess) -> str:
        """Jobs running at the last heartbeat, of its concurrency."""
        return f"{obj.running_jobs} of {obj.concurrency}"

    @admin.display(description="up")
    def up(self, obj: WorkerProcess) -> str:
        """How long since it started."""
        return humanize_delay(obj.up_for)  # type: ignore[attr-defined]

    @admin.display(description="queues")
    def queue_list(self, obj: WorkerProcess) -> str:
        return queue_list(obj.queues)

    @admin.display(description="lease")
    def lease_shown(self, obj: WorkerProcess) -> str:
        return str(obj.lease)

    @admin.display(description="last heartbeat")
    def heartbeat(self, obj: WorkerProcess) -> str:
        return f"{humanize_delay(obj.heartbeat_age)} ago"  # type: ignore[attr-defined]

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        """The page's own filters only, and never a NUL (PostgreSQL stores none: the query could only fail).

        Refused, a URL filter is a 400 before any query runs (docs/admin.md#what-the-admin-refuses).
        """
        return "\x00" not in value and lookup in FILTER_LOOKUPS
