"""Requeue and discard from the admin: a mixin over django_jobretry.deadletters.

Nothing here changes job state itself; it works out which dead letters the
operator meant, asks "are you sure?" with counts before a bulk action
(admin/confirmation.py), calls the service (which locks and re-checks each
row, in chunks), then reports and logs what happened. Items handled by
someone else between page render and click are reported as such, never
silently dropped (docs/design.md#dead-letters). Both rights are checked on
the server, not just by hiding buttons.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.translation import ngettext

from django_jobretry import deadletters
from django_jobretry.admin import audit, confirmation
from django_jobretry.admin.base import holds, parse_id, warn_ignored
from django_jobretry.admin.confirmation import PINNED_FIELD, summaries, target_ids
from django_jobretry.exceptions import CannotResubmit, RequeueConflict
from django_jobretry.models import DeadLetter

if TYPE_CHECKING:  # generic only in django-stubs, not at run time
    from django.db.models.options import Options

    _Base = admin.ModelAdmin[DeadLetter]
else:
    _Base = admin.ModelAdmin

#: The two operations, by the names their URLs, forms and permissions use.
VERBS = ("requeue", "discard")


def _require(allowed: bool) -> None:
    """Defence in depth: Django already refuses actions a user lacks, check again."""
    if not allowed:
        raise PermissionDenied


def _post_with(request: HttpRequest, allowed: bool, object_id: str) -> int:
    """The guard of the detail-page buttons: POST only (CSRF-checked by admin_view), then the right."""
    if not allowed:
        raise PermissionDenied
    pk = parse_id(object_id)
    if pk is None:
        raise Http404("no such dead letter")
    return pk


class DeadLetterActions(_Base):
    """Requeue and discard: changelist actions and detail-page buttons.

    Each needs its own permission (``requeue_deadletter``,
    ``discard_deadletter``). deadletters/admin_pages.py builds "everything matching
    the list" on these.
    """

    def has_requeue_permission(self, request: HttpRequest, obj: DeadLetter | None = None) -> bool:
        return holds(request, self.opts, "requeue")

    def has_discard_permission(self, request: HttpRequest, obj: DeadLetter | None = None) -> bool:
        return holds(request, self.opts, "discard")

    def may(self, request: HttpRequest, verb: str) -> bool:
        """Whether the user may ``verb`` ("requeue" or "discard") dead letters."""
        return (
            self.has_requeue_permission(request)
            if verb == "requeue"
            else self.has_discard_permission(request)
        )

    def action_urls(self) -> list[URLPattern]:
        """The detail page's Requeue and Discard buttons post here."""
        info = self.opts.app_label, self.opts.model_name
        wrap = self.admin_site.admin_view  # login, staff, CSRF, never_cache
        return [
            path("<path:object_id>/requeue/", wrap(self.requeue_view), name="{}_{}_requeue".format(*info)),
            path("<path:object_id>/discard/", wrap(self.discard_view), name="{}_{}_discard".format(*info)),
        ]

    def _with_filters(self, request: HttpRequest, url: str) -> str:
        """``url`` carrying the changelist filters the operator came from."""
        context: dict[str, Options[Any] | str] = {
            "preserved_filters": self.get_preserved_filters(request),
            "opts": self.opts,
        }
        return add_preserved_filters(context, url)

    def _url(self, name: str, *args: object) -> str:
        return reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_{name}", args=args)

    def too_many(self, request: HttpRequest, ids: list[int]) -> bool:
        """Whether ``ids`` are more than one request may act on; if so, the operator is told."""
        if len(ids) <= confirmation.BULK_LIMIT:
            return False
        self.message_user(request, too_many_text(), messages.ERROR)
        return True

    def act(self, request: HttpRequest, verb: str, ids: list[int], *, vanished: int = 0) -> None:
        """Requeue or discard ``ids`` through the service (in its chunks), then log and report.

        ``vanished`` counts dead letters the confirmation showed that are gone
        since (handled by someone else), for a filter-wide action whose ids
        were not pinned.
        """
        before = summaries(ids)
        if verb == "requeue":
            result = deadletters.requeue_many(ids, actor=audit.actor(request))
            # requeue_many appends to done and jobs together: they pair up in order.
            pairs = zip(result.done, result.jobs, strict=True)
            audit.log(request, [row for pk, job in pairs for row in audit.requeued(before[pk], job)])
        else:
            result = deadletters.discard_many(ids, actor=audit.actor(request))
            audit.log(request, [row for pk in result.done for row in audit.discarded(before[pk])])
        self._report(request, verb=verb, result=result, vanished=vanished)

    def _report(
        self, request: HttpRequest, *, verb: str, result: deadletters.BulkResult, vanished: int
    ) -> None:
        """One message: how many were acted on, already handled by someone else, refused."""
        done, conflicts = len(result.done), len(result.conflicts)
        handled = len(result.already_handled) + vanished
        if verb == "requeue":
            text = ngettext("%(count)d dead letter requeued.", "%(count)d dead letters requeued.", done)
        else:
            text = ngettext("%(count)d dead letter discarded.", "%(count)d dead letters discarded.", done)
        parts = [text % {"count": done}]
        if handled:
            parts.append(
                ngettext(
                    "%(count)d was already handled by someone else.",
                    "%(count)d were already handled by someone else.",
                    handled,
                )
                % {"count": handled}
            )
        if conflicts:
            parts.append(
                ngettext(
                    "%(count)d not requeued: %(why)s",
                    "%(count)d not requeued: %(why)s",
                    conflicts,
                )
                % {"count": conflicts, "why": refusals_text(result.refusals)}
            )
        level = messages.SUCCESS if not (handled or conflicts) else messages.WARNING
        self.message_user(request, " ".join(parts), level)

    def _bulk(
        self, request: HttpRequest, queryset: QuerySet[DeadLetter], verb: str
    ) -> TemplateResponse | None:
        """A changelist action: the confirmation page first (like delete_selected), then the action."""
        _require(self.may(request, verb))
        ids, invalid = target_ids(request, queryset)
        if invalid:
            warn_ignored(self, request, invalid)
        if self.too_many(request, ids):
            return None
        if request.POST.get("post") != "yes":
            hidden = {
                "action": request.POST.get("action", f"{verb}_selected"),
                "select_across": "1",
                helpers.ACTION_CHECKBOX_NAME: str(ids[0]) if ids else "",
                PINNED_FIELD: ",".join(map(str, ids)),
                "post": "yes",
            }
            cancel = self._with_filters(request, self._url("changelist"))
            return confirmation.page(
                self, request, verb=verb, ids=ids, hidden=hidden, form_url="", cancel_url=cancel
            )
        self.act(request, verb, ids)
        return None

    @admin.action(permissions=["requeue"], description="Requeue selected dead letters")
    def requeue_selected(
        self, request: HttpRequest, queryset: QuerySet[DeadLetter]
    ) -> TemplateResponse | None:
        """Each still-dead letter becomes a ready job, after a confirmation page with counts."""
        return self._bulk(request, queryset, "requeue")

    @admin.action(permissions=["discard"], description="Discard selected dead letters")
    def discard_selected(
        self, request: HttpRequest, queryset: QuerySet[DeadLetter]
    ) -> TemplateResponse | None:
        """Each still-dead letter is deleted for good, after a confirmation page with counts."""
        return self._bulk(request, queryset, "discard")

    def _changelist_redirect(self, request: HttpRequest) -> HttpResponseRedirect:
        """Back to the list the operator came from, filters kept."""
        return HttpResponseRedirect(self._with_filters(request, self._url("changelist")))

    def _object_redirect(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Back to the detail page (e.g. after a refused requeue), filters kept."""
        return HttpResponseRedirect(self._with_filters(request, self._url("change", pk)))

    def _already_handled(self, request: HttpRequest, pk: int) -> HttpResponse:
        self.message_user(request, f"Dead letter {pk} was already handled by someone else.", messages.WARNING)
        return self._changelist_redirect(request)

    def requeue_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The detail page's Requeue button: one dead letter, at once (the page showed it all)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        pk = _post_with(request, self.has_requeue_permission(request), object_id)
        dead = summaries([pk]).get(pk)
        try:
            job = deadletters.requeue(pk, actor=audit.actor(request))
        except deadletters.NotDead:
            return self._already_handled(request, pk)
        except CannotResubmit as exc:
            self.message_user(request, f"{exc}.", messages.ERROR)
            return self._object_redirect(request, pk)
        except deadletters.RequeueConflict as exc:
            self.message_user(request, f"Dead letter {pk} was not requeued: {exc.why}.", messages.ERROR)
            return self._object_redirect(request, pk)
        if dead is not None:  # always: it existed until the service took it
            audit.log(request, audit.requeued(dead, job))
        new = f"{job.source} task" if isinstance(job, deadletters.Resubmitted) else "job"
        self.message_user(request, f"Dead letter {pk} requeued as {new} {job.pk}.", messages.SUCCESS)
        return self._changelist_redirect(request)

    def discard_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The detail page's Discard button: a confirmation page, then the discard."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        pk = _post_with(request, self.has_discard_permission(request), object_id)
        dead = summaries([pk]).get(pk)
        if dead is not None and request.POST.get("post") != "yes":
            back = self._with_filters(request, self._url("change", pk))
            return confirmation.page(
                self,
                request,
                verb="discard",
                ids=[pk],
                hidden={"post": "yes"},
                form_url=request.get_full_path(),
                cancel_url=back,
            )
        try:
            deadletters.discard(pk, actor=audit.actor(request))
        except deadletters.NotDead:
            return self._already_handled(request, pk)
        if dead is not None:
            audit.log(request, audit.discarded(dead))
        self.message_user(request, f"Dead letter {pk} discarded.", messages.SUCCESS)
        return self._changelist_redirect(request)


#: Refused dead letters a message names one by one; the rest are counted.
REFUSALS_NAMED = 20


def refusals_text(refusals: list[RequeueConflict]) -> str:
    """Each refused dead letter and why (its held unique key, or what its source said), the first few."""
    named = "; ".join(
        f"dead letter {refused.dead_letter_id}: {refused.why}" for refused in refusals[:REFUSALS_NAMED]
    )
    more = len(refusals) - REFUSALS_NAMED
    return f"{named}; and {more} more." if more > 0 else f"{named}."


def too_many_text() -> str:
    return (
        f"More than {confirmation.BULK_LIMIT:,} dead letters selected: nothing was done. Narrow the list "
        "with the filters, or use `manage.py deadletters`, which paces bulk work."
    )
