"""The dead-letter list's own pages: "… all matching", failure groups, and the dashboard's dying panel.

Requeue or discard everything matching the dead-letter list's filters, not only the ticked rows.

After an incident the operator filters the list (this task, this reason,
since 02:00) and wants all of it back, not a page of 50. The list's
"Requeue all matching…" and "Discard all matching…" links carry its query
string here. The rows are chosen by the list's own ChangeList, so the
filters, search and date hierarchy mean exactly what they mean on the list
and every refusal of the list applies: a filter on arguments the user may
not read is the same 400 (admin/base.py ``lookup_allowed``).

A GET shows the confirmation page with counts (admin/confirmation.py). It
pins the highest id it counted and how many: "Yes" acts only on dead
letters that matched then (a dead letter dying after the page was drawn is
left alone; dead letters never change, so a row that matched still does),
and reports the ones someone else handled meanwhile. One request acts on
at most BULK_LIMIT dead letters, through the service in its chunks; for
more the page names the equivalent ``manage.py deadletters`` command, which
paces the work.

The "Failure groups" page lists the groups (deadletters/search.py), largest
first; each leads to the list filtered on its fingerprint (FingerprintFilter)
and to the "… all matching" pages above for that filter. The dashboard shows
the top groups of the last 24 hours, and "What is dying": deaths
(console/trends.py) per task and error class, each count leading to
the list of the dead letters still kept, filtered the same way.
"""

from __future__ import annotations

import copy
import shlex
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin.options import IS_FACETS_VAR, IS_POPUP_VAR, TO_FIELD_VAR, IncorrectLookupParameters
from django.contrib.admin.views.main import ALL_VAR, ERROR_FLAG, ORDER_VAR, PAGE_VAR
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect, QueryDict
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.http import urlencode

from django_jobretry import console
from django_jobretry.admin import confirmation
from django_jobretry.admin.base import parse_id
from django_jobretry.admin.operations import VERBS, DeadLetterActions
from django_jobretry.console.trends import Deaths, Dying
from django_jobretry.deadletters import search
from django_jobretry.deadletters.search import FailureGroup
from django_jobretry.models import DeadLetter
from django_jobretry.models.fingerprints import check_fingerprint

#: Where the list's query string travels (Django's own name for preserved filters).
FILTERS = "_changelist_filters"
#: What the confirmation pins: the highest id it counted, and how many it counted.
UPTO_FIELD = "jobretry_upto"
COUNT_FIELD = "jobretry_count"
#: List parameters that say how to show the list, not which rows are on it.
NOT_FILTERS = frozenset({PAGE_VAR, ORDER_VAR, ERROR_FLAG, ALL_VAR, IS_FACETS_VAR, IS_POPUP_VAR, TO_FIELD_VAR})
#: The list's filters that `manage.py deadletters <verb> --all` takes as options.
CLI_OPTIONS = {
    "queue_name": "--queue",
    "task_name": "--task",
    "reason": "--reason",
    "fingerprint": "--fingerprint",
}


def list_filters(query: QueryDict) -> QueryDict:
    """The filtering part of a list's query string (no page, sort order or error flag)."""
    kept = QueryDict(mutable=True)
    for key, values in query.lists():
        if key not in NOT_FILTERS:
            kept.setlist(key, values)
    return kept


def command(verb: str, filters: QueryDict) -> str:
    """The `manage.py deadletters` command that does the same, when the filters translate."""
    options = []
    for key, values in filters.lists():
        option = CLI_OPTIONS.get(key.removesuffix("__exact"))
        if option is None or len(values) != 1:
            return f"manage.py deadletters {verb} --all --queue/--task/--reason/--error-class/--older-than …"
        options.append(f"{option} {shlex.quote(values[0])}")
    return shlex.join(["manage.py", "deadletters", verb, "--all"]) + "".join(f" {o}" for o in options)


class MatchingActions(DeadLetterActions):
    """The actions, plus "Requeue / Discard all matching…": every dead letter the list's filters select.

    Mixed into DeadLetterAdmin; the same permissions as the actions.
    """

    def matching_urls(self) -> list[URLPattern]:
        """The confirmation page, then the action, one URL per verb."""
        info = self.opts.app_label, self.opts.model_name
        wrap = self.admin_site.admin_view
        return [
            path(
                f"matching/{verb}/",
                wrap(self.matching_view),
                {"verb": verb},
                name=f"{info[0]}_{info[1]}_{verb}_matching",
            )
            for verb in VERBS
        ]

    def matching_links(self, request: HttpRequest) -> list[tuple[str, str, str]]:
        """(label, url, css class) of the list's "… all matching" links the user may follow."""
        query = urlencode({FILTERS: list_filters(request.GET).urlencode()})
        found = []
        for verb in VERBS:
            if self.may(request, verb):
                url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_{verb}_matching")
                found.append(
                    (f"{verb.capitalize()} all matching…", f"{url}?{query}", f"jobretry-{verb}-matching")
                )
        return found

    def matching_view(self, request: HttpRequest, verb: str) -> HttpResponse:
        """GET: the confirmation page for every dead letter matching the list. POST "yes": the action."""
        if request.method not in ("GET", "POST"):
            return HttpResponseNotAllowed(["GET", "POST"])
        if not (self.has_view_permission(request) and self.may(request, verb)):
            raise PermissionDenied
        filters = list_filters(QueryDict(request.GET.get(FILTERS, "")))
        back = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist")
        back_to_list = f"{back}?{filters.urlencode()}" if filters else back
        try:
            matching = self._matching(request, filters)
        except IncorrectLookupParameters:
            return HttpResponseRedirect(f"{back}?{ERROR_FLAG}=1")  # as the list answers them
        if request.method == "POST":
            return self._act_on_matching(request, verb, matching, back_to_list)
        ids = list(matching.values_list("pk", flat=True)[: confirmation.BULK_LIMIT + 1])
        refused = ""
        if len(ids) > confirmation.BULK_LIMIT:
            refused = (
                f"More than {confirmation.BULK_LIMIT:,} dead letters match this list: too many for one admin "
                f"request, so nothing can be done here. Narrow the list, or run `{command(verb, filters)}` "
                "(add --rate to pace it)."
            )
        hidden = {"post": "yes", UPTO_FIELD: str(max(ids, default=0)), COUNT_FIELD: str(len(ids))}
        scope = [(key, value) for key, values in filters.lists() for value in values]
        return confirmation.page(
            self,
            request,
            verb=verb,
            ids=ids,
            hidden=hidden,
            form_url=request.get_full_path(),
            cancel_url=back_to_list,
            scope=scope,
            refused=refused,
        )

    def _matching(self, request: HttpRequest, filters: QueryDict) -> QuerySet[DeadLetter]:
        """The dead letters the list shows for ``filters``, built by the list's own ChangeList.

        Raises what the list raises: DisallowedModelAdminLookup (a 400) for a
        refused filter, IncorrectLookupParameters for one that cannot run.
        """
        listing = copy.copy(request)
        listing.GET = filters  # type: ignore[assignment]
        changelist = self.get_changelist_instance(listing)
        rows: QuerySet[DeadLetter] = changelist.queryset
        return rows

    def _act_on_matching(
        self, request: HttpRequest, verb: str, matching: QuerySet[DeadLetter], back: str
    ) -> HttpResponse:
        """The confirmed action, on what matched when the confirmation was drawn."""
        upto, counted = (
            parse_id(request.POST.get(UPTO_FIELD, "")),
            parse_id(request.POST.get(COUNT_FIELD, "")),
        )
        if request.POST.get("post") != "yes" or upto is None or counted is None:
            self.message_user(
                request,
                "This confirmation form is incomplete or was altered: nothing was done.",
                messages.ERROR,
            )
            return HttpResponseRedirect(back)
        ids = sorted(
            matching.filter(pk__lte=upto).values_list("pk", flat=True)[: confirmation.BULK_LIMIT + 1]
        )
        if not self.too_many(request, ids):
            self.act(request, verb, ids, vanished=max(counted - len(ids), 0))
        return HttpResponseRedirect(back)


# --- failure groups ---------------------------------------------------------------------------

if TYPE_CHECKING:  # generic only in django-stubs, not at run time
    _Base = admin.ModelAdmin[DeadLetter]
else:
    _Base = admin.ModelAdmin

#: The page's periods: ``?since=`` value, label, how far back (None: every dead letter kept).
PERIODS: tuple[tuple[str, str, timedelta | None], ...] = (
    ("1h", "last hour", timedelta(hours=1)),
    ("24h", "last 24 hours", timedelta(hours=24)),
    ("7d", "last 7 days", timedelta(days=7)),
    ("all", "all kept", None),
)
#: Groups on the page, and on the dashboard.
GROUPS_SHOWN = 100
DASHBOARD_GROUPS = 5


class FingerprintFilter(admin.SimpleListFilter):
    """``?fingerprint=<16 hex digits>``: one failure group's dead letters; shown only while in use."""

    title = "failure group"
    parameter_name = "fingerprint"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        value = self.value()
        return [(value, value)] if value else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value is None:
            return queryset
        try:
            return queryset.filter(fingerprint=check_fingerprint(value))
        except ValueError as exc:
            raise IncorrectLookupParameters(str(exc)) from exc


def group_links(site: str, group: FailureGroup) -> dict[str, str]:
    """The group's dead-letter list, and its "… all matching" confirmation page per verb."""
    changelist = reverse(f"{site}:django_jobretry_deadletter_changelist")
    query = urlencode({FingerprintFilter.parameter_name: group.fingerprint})
    links = {"list": f"{changelist}?{query}"}
    for verb in VERBS:
        url = reverse(f"{site}:django_jobretry_deadletter_{verb}_matching")
        links[verb] = f"{url}?{urlencode({FILTERS: query})}"
    return links


def rows(site: str, found: list[FailureGroup]) -> list[dict[str, Any]]:
    """What the page and the dashboard show of each group."""
    return [
        {
            "group": group,
            "links": group_links(site, group),
            "error_name": group.example_class.rsplit(".", 1)[-1],
        }
        for group in found
    ]


def top_groups(site: str) -> list[dict[str, Any]]:
    """The dashboard's panel: the largest groups among the dead letters of the last 24 hours."""
    return rows(site, search.groups(since=timedelta(hours=24), limit=DASHBOARD_GROUPS))


class FailureGroupsPage(_Base):
    """The page, for anyone who may view dead letters; its buttons only for those who may act."""

    def groups_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        view = self.admin_site.admin_view(self.groups_view)
        return [path("groups/", view, name="{}_{}_groups".format(*info))]

    def groups_view(self, request: HttpRequest) -> TemplateResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        chosen = request.GET.get("since", "all")
        period = next((p for p in PERIODS if p[0] == chosen), PERIODS[-1])
        found = search.groups(since=period[2], limit=GROUPS_SHOWN)
        site = self.admin_site.name
        context = {
            **self.admin_site.each_context(request),
            "title": f"Failure groups, {period[1]}",
            "subtitle": None,
            "opts": self.opts,
            "changelist_url": reverse(f"{site}:{self.opts.app_label}_{self.opts.model_name}_changelist"),
            "groups": rows(site, found),
            "periods": [{"value": v, "label": label, "current": v == period[0]} for v, label, _ in PERIODS],
            "limit": GROUPS_SHOWN,
            # Only the verbs the user may use: an empty dict hides the column.
            "may": {verb: True for verb in VERBS if self.may(request, verb)},  # type: ignore[attr-defined]
        }
        request.current_app = site
        return TemplateResponse(request, "admin/django_jobretry/deadletter/failure_groups.html", context)


# --- the dashboard's "What is dying" ------------------------------------------------------------

#: Rows of each table; the rest are counted in a line below it.
ROWS_SHOWN = 15
#: What a death without an exception (lease lost, cancelled) is listed as among the error classes.
NO_EXCEPTION = "(none: lease lost or cancelled)"


@dataclass(frozen=True)
class Link:
    """A count and the list it leads to (None: nothing to list, the count is 0)."""

    count: console.Count
    url: str | None


def _link(count: console.Count, base: str, query: dict[str, str] | None) -> Link:
    """``count`` leading to ``base`` filtered by ``query``; no link for a 0 or without a filter."""
    return Link(count, f"{base}?{urlencode(query)}" if query and count.value != 0 else None)


def _since(named: dict[str, str] | None, moment: str) -> dict[str, str] | None:
    """The dead-letter list's filter for ``named`` (a task or error class), died since ``moment``."""
    return None if named is None else {**named, "dead_at__gte": moment}


def _rows(
    found: list[Dying], *, key: str, dead_url: str, job_url: str | None, now: datetime
) -> dict[str, Any]:
    """The table of ``found`` (tasks when ``job_url`` is given, else error classes), ROWS_SHOWN at most."""
    hour_ago, day_ago = (now - timedelta(hours=1)).isoformat(), (now - timedelta(days=1)).isoformat()
    rows = []
    for item in found[:ROWS_SHOWN]:
        # A death without an exception has no class to filter the list by: no links.
        named = {key: item.name} if item.name else None
        retrying = None
        if job_url is not None and item.retrying is not None:
            retrying = _link(item.retrying, job_url, {"status": "retrying", "task_name": item.name})
        rows.append(
            {
                "name": item.name or NO_EXCEPTION,
                "short": item.name.rsplit(".", 1)[-1] if item.name else NO_EXCEPTION,
                "url": f"{dead_url}?{urlencode(named)}" if named else None,
                "last_hour": _link(item.last_hour, dead_url, _since(named, hour_ago)),
                "last_day": _link(item.last_day, dead_url, _since(named, day_ago)),
                "retrying": retrying,
            }
        )
    return {"rows": rows, "more": max(len(found) - ROWS_SHOWN, 0)}


def panel(found: Deaths, *, site: str, now: datetime) -> dict[str, Any]:
    """The tables of the "What is dying" panel."""
    dead_url = reverse(f"{site}:django_jobretry_deadletter_changelist")
    job_url = reverse(f"{site}:django_jobretry_job_changelist")
    return {
        "tasks": _rows(found.by_task, key="task_name", dead_url=dead_url, job_url=job_url, now=now),
        "errors": _rows(found.by_error, key="last_error_class", dead_url=dead_url, job_url=None, now=now),
    }
