"""Requeue or discard everything matching the dead-letter list's filters, not only the ticked rows.

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
"""

from __future__ import annotations

import copy
import shlex

from django.contrib import messages
from django.contrib.admin.options import IS_FACETS_VAR, IS_POPUP_VAR, TO_FIELD_VAR, IncorrectLookupParameters
from django.contrib.admin.views.main import ALL_VAR, ERROR_FLAG, ORDER_VAR, PAGE_VAR
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect, QueryDict
from django.urls import URLPattern, path, reverse
from django.utils.http import urlencode

from django_jobretry.admin import confirmation
from django_jobretry.admin.base import parse_id
from django_jobretry.admin.operations import VERBS, DeadLetterActions
from django_jobretry.models import DeadLetter

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
