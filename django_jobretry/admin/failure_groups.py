"""The "Failure groups" page of the dead-letter admin, and the list's filter on one group.

The page lists the failure groups (services/failure_groups.py), largest
first: count, first and last seen, tasks, reasons and one example message.
Each group leads to the dead-letter list filtered on its fingerprint
(``?fingerprint=…``, FingerprintFilter), and to "Requeue / Discard group…",
which are the list's "… all matching" confirmation pages for that filter:
the same counts, pinned ids, compare-and-swap and permissions
(admin/matching.py). The dashboard shows the top groups of the last 24
hours (``top_groups``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.http import urlencode

from django_jobretry.admin.matching import FILTERS
from django_jobretry.admin.operations import VERBS
from django_jobretry.models import DeadLetter
from django_jobretry.models.fingerprints import check_fingerprint
from django_jobretry.services import failure_groups
from django_jobretry.services.failure_groups import FailureGroup

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
    return rows(site, failure_groups.groups(since=timedelta(hours=24), limit=DASHBOARD_GROUPS))


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
        found = failure_groups.groups(since=period[2], limit=GROUPS_SHOWN)
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
