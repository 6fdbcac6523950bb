"""The Flows page: where each workflow stands, what blocks it, its steps' graph, and cancel.

Read-only like the other pages: a flow's rows are written by build.py and
advanced by the database (jobs/functions.sql, "workflows"), so nothing here
adds, edits or deletes one. The list shows each flow's state, how many of
its steps succeeded, and the dead letter blocking it since when, a link to
that dead letter, where the operator requeues it (which resumes the flow)
or discards it. The counts are a subquery of the list's one query, so a
page of 50 flows costs what a page of one does.

A flow's page shows its steps and their graph (flows/admin_pages.py), never
their arguments. Cancelling needs ``cancel_flow``, checked on the server,
asks first with the counts of what it stops (from the list's action or the
page's button, POST only), and goes through flows/service.py; the admin log
records who did it.
"""

from __future__ import annotations

from typing import Any, override

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.models import CHANGE
from django.core.exceptions import PermissionDenied
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, Now
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from django_jobretry.admin import audit, rendering
from django_jobretry.admin.base import NoWritesAdmin, exact_id, holds, parse_id
from django_jobretry.admin.changelist import CappedCountPaginator
from django_jobretry.flows import admin_pages
from django_jobretry.flows.service import cancel_flow
from django_jobretry.models import Flow, FlowState, FlowStep, StepState

#: What the detail page's Cancel button and the list's action need.
CANCEL_FLOW = "django_jobretry.cancel_flow"


def _done() -> Coalesce:
    """The row's succeeded steps, a subquery of the list's own query (its (flow, name) index)."""
    succeeded = (
        FlowStep.objects.filter(flow=OuterRef("pk"), state=StepState.SUCCEEDED)
        .order_by()
        .values("flow")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(succeeded, output_field=IntegerField()), 0)


class FlowAdmin(NoWritesAdmin):
    """Newest flow first, filtered by state, searched by name or id; one action: cancel."""

    list_display = ("flow", "state_shown", "progress", "blocked", "created_at_shown", "finished_at_shown")
    list_display_links = ("flow",)
    list_filter = ("state",)
    search_fields = ("name",)
    search_help_text = "A part of the flow's name; a number also matches a flow's id."
    ordering = ("-id",)
    sortable_by = ("flow", "created_at_shown")
    list_per_page = 50
    # Flows can be one per order: never COUNT(*) all of them just to draw a list.
    show_full_result_count = False
    paginator = CappedCountPaginator
    actions = ("cancel_selected",)
    fields = (
        *("name", "state_shown", "progress", "blocked", "created_at_shown", "finished_at_shown"),
        "cancelled_by",
    )
    readonly_fields = fields
    change_form_template = "admin/django_jobretry/flow/change_form.html"

    class Media:
        css = {"all": ("django_jobretry/admin.css",)}

    created_at_shown = rendering.time_column("created_at", sortable=True)
    finished_at_shown = rendering.time_column("finished_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Flow]:
        """The rows with their succeeded steps, the database's now, and whether dead letters may be opened.

        The right rides on the rows because a column sees only its row, and the
        admin instance is shared by every request.
        """
        may_view_dead = request.user.has_perm(rendering.VIEW_DEAD_LETTER)
        rows: QuerySet[Flow] = super().get_queryset(request)
        return rows.annotate(
            jobretry_done=_done(), jobretry_now=Now(), jobretry_view_dead=Value(may_view_dead)
        )

    # -- columns -------------------------------------------------------------------------------------

    @admin.display(description="flow", ordering="id")
    def flow(self, obj: Flow) -> SafeString:
        return format_html(
            '<span class="jobretry-task-name">{}</span><span class="jobretry-quiet">flow {}</span>',
            obj.name,
            obj.pk,
        )

    @admin.display(description="state")
    def state_shown(self, obj: Flow) -> SafeString:
        css = "jobretry-dead" if obj.state == FlowState.BLOCKED else f"jobretry-flow-{obj.state}"
        return format_html('<span class="{}">{}</span>', css, obj.get_state_display())

    @admin.display(description="steps done")
    def progress(self, obj: Flow) -> str:
        """ "3 of 7 steps done": succeeded steps of all its steps, callbacks included."""
        done = getattr(obj, "jobretry_done", None)
        if done is None:  # a row not read through get_queryset
            done = FlowStep.objects.filter(flow=obj, state=StepState.SUCCEEDED).count()
        return f"{done} of {obj.steps} steps done"

    @admin.display(description="blocked by", ordering="blocked_at")
    def blocked(self, obj: Flow) -> SafeString | str:
        """The dead letter it waits for (a link for who may open it), since when and how long."""
        if obj.blocked_by is None:
            return "-"
        text = f"dead letter {obj.blocked_by}"
        if getattr(obj, "jobretry_view_dead", False):
            url = reverse(f"{self.admin_site.name}:django_jobretry_deadletter_change", args=[obj.blocked_by])
            shown = format_html('<a href="{}" class="jobretry-blocked-by">{}</a>', url, text)
        else:
            shown = format_html("{}", text)
        now = getattr(obj, "jobretry_now", None)
        if obj.blocked_at is None or now is None:
            return shown
        return format_html(
            '{}<span class="jobretry-quiet">since {}, {} ago</span>',
            shown,
            *rendering.since(obj.blocked_at, now),
        )

    # -- the page, its rows and the request's input ------------------------------------------------

    @override
    def detail_context(self, request: HttpRequest, obj: Flow | None) -> dict[str, Any]:
        """The heading, the steps and their graph, and the Cancel button for who may use it."""
        if obj is None:
            return {}
        user = request.user
        found = admin_pages.steps_of(
            obj,
            site=self.admin_site.name,
            may_view_job=user.has_perm(rendering.VIEW_JOB),
            may_view_dead=user.has_perm(rendering.VIEW_DEAD_LETTER),
        )
        return {
            **found,
            "title": f"Flow {obj.pk}: {obj.name}",
            "subtitle": obj.get_state_display(),
            "can_cancel": self.has_cancel_permission(request) and obj.state in admin_pages.OPEN_STATES,
        }

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        """A flow by its ASCII-digit id; anything else is "not found", never a 500."""
        pk = parse_id(object_id)
        if pk is None or from_field not in (None, self.opts.pk.name):
            return None
        return self.get_queryset(request).filter(pk=pk).first()

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        """The state filter only, never with a NUL (PostgreSQL stores none): anything else is a 400."""
        return "\x00" not in value and lookup in ("state", "state__exact")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Flow], search_term: str
    ) -> tuple[QuerySet[Flow], bool]:
        """A part of the name, or a flow's id when the term is a number; a NUL matches nothing."""
        if "\x00" in search_term:
            return queryset.none(), False
        found, duplicates = super().get_search_results(request, queryset, search_term)
        if (number := exact_id(search_term)) is not None:
            found |= queryset.filter(pk=number)
        return found, duplicates

    # -- cancel ----------------------------------------------------------------------------------------

    def has_cancel_permission(self, request: HttpRequest, obj: Flow | None = None) -> bool:
        return holds(request, self.opts, "cancel")

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        view = self.admin_site.admin_view(self.cancel_view)  # login, staff, CSRF, never_cache
        # Before the defaults, whose "<path:object_id>/" would swallow it.
        return [
            path("<path:object_id>/cancel/", view, name="{}_{}_cancel".format(*info)),
            *super().get_urls(),
        ]

    @admin.action(permissions=["cancel"], description="Cancel selected flows")
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Flow]) -> TemplateResponse | None:
        """The confirmation page with the counts; on "yes", each flow cancelled, then one report."""
        if not self.has_cancel_permission(request):  # Django refuses actions a user lacks already
            raise PermissionDenied
        flows = list(queryset.order_by("pk"))
        if request.POST.get("post") != "yes":
            hidden = [("action", "cancel_selected"), ("post", "yes")]
            hidden += [(helpers.ACTION_CHECKBOX_NAME, str(flow.pk)) for flow in flows]
            back = reverse(f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_changelist")
            return admin_pages.cancel_page(self, request, flows, hidden=hidden, form_url="", cancel_url=back)
        self._cancel(request, flows)
        return None

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The page's Cancel button: POST only, the confirmation page, then the cancel."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not (self.has_view_permission(request) and self.has_cancel_permission(request)):
            raise PermissionDenied
        flow = self.get_object(request, object_id)
        if flow is None:
            raise Http404("no such flow")
        back = reverse(
            f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_change", args=[flow.pk]
        )
        if request.POST.get("post") != "yes":
            hidden = [("post", "yes")]
            return admin_pages.cancel_page(
                self, request, [flow], hidden=hidden, form_url=request.get_full_path(), cancel_url=back
            )
        self._cancel(request, [flow])
        return HttpResponseRedirect(back)

    def _cancel(self, request: HttpRequest, flows: list[Flow]) -> None:
        """Cancel each through the service, log it, and say what happened in one message per outcome."""
        done: list[str] = []
        ended: list[str] = []
        for flow in flows:
            outcome = cancel_flow(flow.pk, actor=audit.actor(request))
            if outcome is None:
                ended.append(str(flow))
                continue
            said = (
                f"Cancelled: {outcome.cancelled} steps cancelled, {outcome.stopping} running asked to stop."
            )
            audit.log(request, [(flow, CHANGE, said, f"Flow {flow.pk} cancelled")])
            done.append(
                f"{flow.name} #{flow.pk} ({outcome.cancelled} steps cancelled, "
                f"{outcome.stopping} running asked to stop)"
            )
        if done:
            self.message_user(request, f"Cancelled: {', '.join(done)}.", messages.SUCCESS)
        if ended:
            self.message_user(request, f"Nothing to do, ended already: {', '.join(ended)}.", messages.WARNING)
