"""Requeue and discard from the admin: a mixin over django_jobretry.deadletters.

Nothing here changes job state itself; it works out which dead letters the
operator meant, calls the service (which locks and re-checks each row), then
reports and logs what happened. Items handled by someone else between page
render and click are reported as such, never silently dropped
(docs/design.md#dead-letters). Both rights are checked on the server, not
just by hiding buttons.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django import forms
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
from django_jobretry.admin import audit, timestamps
from django_jobretry.admin.base import holds, parse_id
from django_jobretry.admin.rendering import first_line
from django_jobretry.exceptions import CannotResubmit
from django_jobretry.models import DeadLetter

if TYPE_CHECKING:  # generic only in django-stubs, not at run time
    from django.db.models.options import Options

    _Base = admin.ModelAdmin[DeadLetter]
else:
    _Base = admin.ModelAdmin

#: The confirmation page pins the exact ids shown, in one field (a field per id
#: would hit DATA_UPLOAD_MAX_NUMBER_FIELDS beyond 1,000 items).
PINNED_FIELD = "jobretry_ids"
#: Most dead letters one admin request acts on; beyond, `manage.py deadletters` paces the work.
BULK_LIMIT = 10_000
#: Items listed by name on the confirmation page; the rest are counted.
CONFIRM_SHOWN = 100
#: Columns the admin log needs (str(dead_letter)); histories and arguments stay unread.
LOG_FIELDS = ("id", "job_id", "task_name", "reason")
#: Columns the confirmation page lists.
SHOWN_FIELDS = (*LOG_FIELDS, "queue_name", "dead_at", "last_error")


def actor(request: HttpRequest) -> str:
    """The name recorded as "by" in requeue provenance and the service's logs."""
    return request.user.get_username()


def _ints(values: Iterable[str]) -> list[int]:
    """The ids among posted values; anything but ASCII digits (a forged "²", "1e3") is ignored."""
    return sorted({pk for value in values if (pk := parse_id(value)) is not None})


def target_ids(request: HttpRequest, queryset: QuerySet[DeadLetter]) -> list[int]:
    """The ids the operator acted on, including ones that vanished since the page was drawn.

    Django narrows ``queryset`` to the ticked rows that still exist, which
    would hide a race; the ticked ids are read from the POST instead. Ids
    that exist but are outside ``queryset`` (the admin's visible set) are
    dropped; ids that no longer exist are kept, for the service to report.
    """
    pinned = request.POST.get(PINNED_FIELD)
    across = forms.BooleanField(required=False).to_python(request.POST.get("select_across"))
    if pinned is None and across:
        return sorted(queryset.values_list("pk", flat=True)[: BULK_LIMIT + 1])
    wanted = set(_ints(pinned.split(",") if pinned is not None else request.POST.getlist("_selected_action")))
    visible = set(queryset.filter(pk__in=wanted).values_list("pk", flat=True))
    elsewhere = set(DeadLetter.objects.filter(pk__in=wanted - visible).values_list("pk", flat=True))
    return sorted(wanted - elsewhere)


def _summaries(ids: list[int], fields: tuple[str, ...] = LOG_FIELDS) -> dict[int, DeadLetter]:
    return {dead.pk: dead for dead in DeadLetter.objects.filter(pk__in=ids).only(*fields)}


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
    """Requeue and discard, as changelist actions and as detail-page buttons.

    Mixed into DeadLetterAdmin; each needs its own permission
    (``requeue_deadletter``, ``discard_deadletter``).
    """

    def has_requeue_permission(self, request: HttpRequest, obj: DeadLetter | None = None) -> bool:
        return holds(request, self.opts, "requeue")

    def has_discard_permission(self, request: HttpRequest, obj: DeadLetter | None = None) -> bool:
        return holds(request, self.opts, "discard")

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

    def _too_many(self, request: HttpRequest, ids: list[int]) -> bool:
        if len(ids) <= BULK_LIMIT:
            return False
        self.message_user(
            request,
            f"More than {BULK_LIMIT:,} dead letters selected: nothing was done. Narrow the list with the "
            "filters, or use `manage.py deadletters`, which paces bulk work.",
            messages.ERROR,
        )
        return True

    def _report(self, request: HttpRequest, *, requeue: bool, result: deadletters.BulkResult) -> None:
        """One message: how many were acted on, already handled by someone else, refused."""
        done, handled, conflicts = len(result.done), len(result.already_handled), len(result.conflicts)
        if requeue:
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
                    "%(count)d not requeued: a live job holds the same unique key.",
                    "%(count)d not requeued: a live job holds the same unique key.",
                    conflicts,
                )
                % {"count": conflicts}
            )
        level = messages.SUCCESS if not (handled or conflicts) else messages.WARNING
        self.message_user(request, " ".join(parts), level)

    @admin.action(permissions=["requeue"], description="Requeue selected dead letters")
    def requeue_selected(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> None:
        """The changelist action: requeue each still-dead letter, report the rest."""
        _require(self.has_requeue_permission(request))
        ids = target_ids(request, queryset)
        if self._too_many(request, ids):
            return
        before = _summaries(ids)
        result = deadletters.requeue_many(ids, actor=actor(request))
        # requeue_many appends to done and jobs together: they pair up in order.
        pairs = zip(result.done, result.jobs, strict=True)
        audit.log(request, [row for pk, job in pairs for row in audit.requeued(before[pk], job)])
        self._report(request, requeue=True, result=result)

    @admin.action(permissions=["discard"], description="Discard selected dead letters")
    def discard_selected(
        self, request: HttpRequest, queryset: QuerySet[DeadLetter]
    ) -> TemplateResponse | None:
        """The changelist action: a confirmation page first, then discard (like delete_selected)."""
        _require(self.has_discard_permission(request))
        ids = target_ids(request, queryset)
        if self._too_many(request, ids):
            return None
        if request.POST.get("post") != "yes":
            hidden = {
                "action": request.POST.get("action", "discard_selected"),
                "select_across": "1",
                helpers.ACTION_CHECKBOX_NAME: str(ids[0]) if ids else "",
                PINNED_FIELD: ",".join(map(str, ids)),
                "post": "yes",
            }
            cancel = self._with_filters(request, self._url("changelist"))
            return self._confirmation(request, ids, hidden=hidden, form_url="", cancel_url=cancel)
        before = _summaries(ids)
        result = deadletters.discard_many(ids, actor=actor(request))
        audit.log(request, [row for pk in result.done for row in audit.discarded(before[pk])])
        self._report(request, requeue=False, result=result)
        return None

    def _confirmation(
        self,
        request: HttpRequest,
        ids: list[int],
        *,
        hidden: dict[str, str],
        form_url: str,
        cancel_url: str,
    ) -> TemplateResponse:
        """The "are you sure?" page listing what a discard will delete."""
        listed = DeadLetter.objects.filter(pk__in=ids[:CONFIRM_SHOWN]).only(*SHOWN_FIELDS)
        shown = list(timestamps.guard(listed.order_by("-dead_at", "-pk")))
        context = {
            **self.admin_site.each_context(request),
            "title": "Are you sure?",
            "subtitle": None,
            "opts": self.opts,
            "items": [
                (dead, timestamps.shown(dead, "dead_at"), first_line(dead.last_error)) for dead in shown
            ],
            "count": len(ids),
            "more": max(len(ids) - len(shown), 0),
            "hidden_fields": hidden,
            "form_url": form_url,
            "cancel_url": cancel_url,
            "media": self.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request, "admin/django_jobretry/deadletter/discard_confirmation.html", context
        )

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
        """The detail page's Requeue button."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        pk = _post_with(request, self.has_requeue_permission(request), object_id)
        dead = _summaries([pk]).get(pk)
        try:
            job = deadletters.requeue(pk, actor=actor(request))
        except deadletters.NotDead:
            return self._already_handled(request, pk)
        except CannotResubmit as exc:
            self.message_user(request, f"{exc}.", messages.ERROR)
            return self._object_redirect(request, pk)
        except deadletters.RequeueConflict as exc:
            refused = f"Dead letter {pk} was not requeued: a live job holds the same unique key"
            self.message_user(request, f"{refused} {exc.unique_key!r}.", messages.ERROR)
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
        dead = _summaries([pk]).get(pk)
        if dead is not None and request.POST.get("post") != "yes":
            back = self._with_filters(request, self._url("change", pk))
            return self._confirmation(
                request, [pk], hidden={"post": "yes"}, form_url=request.get_full_path(), cancel_url=back
            )
        try:
            deadletters.discard(pk, actor=actor(request))
        except deadletters.NotDead:
            return self._already_handled(request, pk)
        if dead is not None:
            audit.log(request, audit.discarded(dead))
        self.message_user(request, f"Dead letter {pk} discarded.", messages.SUCCESS)
        return self._changelist_redirect(request)
