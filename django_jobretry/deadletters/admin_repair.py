"""Repair before requeue in the admin: edit a dead letter's arguments, review the diff, confirm.

Three steps on one URL (``<id>/repair/``): GET shows the arguments as JSON
to edit; POST "review" parses and validates them exactly as an enqueue
would (deadletters/repair.py ``validated``) and shows the changes; POST
"confirm" repairs and requeues through the service, which compares the
arguments with the digest the first page was drawn from, under the row
lock. Invalid JSON, an oversized payload or a call the task cannot take is
shown on the form, and nothing changes.

Only users who hold ``repair_deadletter`` and ``requeue_deadletter`` and
may read arguments unredacted (``view_job_payload``, no PAYLOAD_REDACTOR:
an edit form would show what a redactor hides) see the button; the URL
refuses everyone else with a 403, whatever step is posted.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from django_jobretry.admin import audit, rendering
from django_jobretry.admin.audit import actor
from django_jobretry.admin.base import holds, parse_id
from django_jobretry.conf import jobretry_settings
from django_jobretry.deadletters import repair
from django_jobretry.exceptions import InvalidJob, NotDead, RequeueConflict
from django_jobretry.models import DeadLetter, DeadLetterSource

if TYPE_CHECKING:  # generic only in django-stubs, not at run time
    _Base = admin.ModelAdmin[DeadLetter]
else:
    _Base = admin.ModelAdmin

#: Characters of a changed value shown in the review table.
VALUE_CHARS = 300


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def shown_changes(found: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The review table's rows: path, what happened, old and new as JSON text."""

    def text(change: dict[str, Any], key: str) -> str:
        if key not in change:
            return ""
        value = json.dumps(change[key], ensure_ascii=False, sort_keys=True)
        return value if len(value) <= VALUE_CHARS else value[: VALUE_CHARS - 1] + "…"

    return [
        {"path": c["path"], "change": c["change"], "old": text(c, "old"), "new": text(c, "new")}
        for c in found
    ]


def recorded_repairs(request: HttpRequest, history: Any) -> dict[str, Any] | None:
    """The repairs a requeue history records, for the Arguments section: values only to who may read them.

    None when there were none; ``{"hidden": N}`` for users who may not read
    arguments unredacted; else one row per change, numbered by its requeue.
    """
    entries = [e for e in history if isinstance(e, dict)] if isinstance(history, list) else []
    repaired = [(n, e) for n, e in enumerate(entries, 1) if isinstance(e.get("repair"), dict)]
    if not repaired:
        return None
    if not rendering.can_filter_payload(request):
        return {"hidden": len(repaired)}
    rows = []
    for number, entry in repaired:
        found = [c for c in entry["repair"].get("changes", []) if isinstance(c, dict) and "path" in c]
        for change in shown_changes(found):
            rows.append({"requeue": number, "by": entry["repair"].get("by", ""), **change})
    return {"rows": rows}


class RepairPage(_Base):
    """The "Repair arguments…" button of the detail page, and its three steps."""

    def may_repair(self, request: HttpRequest, obj: DeadLetter | None = None) -> bool:
        if obj is not None and obj.source != DeadLetterSource.JOBRETRY:
            return False  # another system's payload goes back as it was signed
        return (
            holds(request, self.opts, "repair")
            and holds(request, self.opts, "requeue")
            and rendering.can_filter_payload(request)
        )

    def repair_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        view = self.admin_site.admin_view(self.repair_view)
        return [path("<path:object_id>/repair/", view, name="{}_{}_repair".format(*info))]

    def repair_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method not in ("GET", "POST") or not self.may_repair(request):
            raise PermissionDenied
        pk = parse_id(object_id)
        dead = DeadLetter.objects.filter(pk=pk).first() if pk is not None else None
        if dead is None:
            return self._gone(request, object_id)
        if not self.may_repair(request, dead):
            raise PermissionDenied
        if request.method == "GET":
            return self._page(
                request, dead, pretty(dead.args), pretty(dead.kwargs), repair.digest(dead.args, dead.kwargs)
            )
        args_text, kwargs_text = request.POST.get("args", ""), request.POST.get("kwargs", "")
        seen = request.POST.get("seen", "")
        try:
            args, kwargs = _parsed(args_text, "args"), _parsed(kwargs_text, "kwargs")
            new_args, new_kwargs = repair.validated(dead.task_name, args, kwargs)
            found = repair.changes(dead.args, dead.kwargs, new_args, new_kwargs)
            if not found:
                raise InvalidJob("the arguments are unchanged: use Requeue instead")
        except InvalidJob as exc:
            return self._page(request, dead, args_text, kwargs_text, seen, error=str(exc))
        if request.POST.get("step") != "confirm":
            return self._page(request, dead, args_text, kwargs_text, seen, review=shown_changes(found))
        return self._confirmed(request, dead, (new_args, new_kwargs), seen, (args_text, kwargs_text))

    def _confirmed(
        self,
        request: HttpRequest,
        dead: DeadLetter,
        arguments: tuple[list[Any], dict[str, Any]],
        seen: str,
        texts: tuple[str, str],
    ) -> HttpResponse:
        args, kwargs = arguments
        try:
            repaired = repair.repair(dead.pk, args=args, kwargs=kwargs, seen=seen, actor=actor(request))
        except NotDead:
            return self._gone(request, str(dead.pk))
        except (InvalidJob, RequeueConflict) as exc:
            return self._page(request, dead, *texts, seen, error=str(exc))
        job = repaired.job
        count = len(repaired.changes)
        rows = audit.requeued(dead, job)
        rows.append((job, CHANGE, f"Arguments repaired before requeue: {count} changes.", rows[-1][3]))
        audit.log(request, rows)
        self.message_user(
            request,
            f"Dead letter {dead.pk} repaired ({count} change{'s' if count != 1 else ''}) "
            f"and requeued as job {job.pk}.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(
            reverse(f"{self.admin_site.name}:django_jobretry_job_change", args=[job.pk])
        )

    def _gone(self, request: HttpRequest, object_id: str) -> HttpResponse:
        self.message_user(
            request,
            f"Dead letter {object_id} is no longer a dead letter: someone requeued or discarded it. "
            "Nothing was changed.",
            messages.WARNING,
        )
        return HttpResponseRedirect(reverse(f"{self.admin_site.name}:django_jobretry_deadletter_changelist"))

    def _page(
        self,
        request: HttpRequest,
        dead: DeadLetter,
        args_text: str,
        kwargs_text: str,
        seen: str,
        *,
        error: str = "",
        review: list[dict[str, str]] | None = None,
    ) -> TemplateResponse:
        context = {
            **self.admin_site.each_context(request),
            "title": f"Repair the arguments of dead letter {dead.pk}",
            "subtitle": None,
            "opts": self.opts,
            "original": dead,
            "args_text": args_text,
            "kwargs_text": kwargs_text,
            "seen": seen,
            "error": error,
            "review": review,
            "change_url": reverse(
                f"{self.admin_site.name}:django_jobretry_deadletter_change", args=[dead.pk]
            ),
        }
        request.current_app = self.admin_site.name
        status = 400 if error else 200
        return TemplateResponse(
            request, "admin/django_jobretry/deadletter/repair.html", context, status=status
        )


def _parsed(text: str, name: str) -> Any:
    """The form's JSON text read, or InvalidJob; Python's parser recurses, so deep nesting is refused too."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidJob(f"{name} is not valid JSON: {exc}") from None
    except RecursionError:
        raise InvalidJob(
            f"{name} is nested too deeply to be read: arguments may be nested "
            f"{jobretry_settings.max_args_depth} levels deep (MAX_ARGS_DEPTH)"
        ) from None
