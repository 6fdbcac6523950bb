"""The "are you sure?" page before resuming pauses or closing breakers, from their pages or the dashboard.

Resuming a queue or closing a breaker lets every job it held run at once:
after a partner's outage that can be thousands of calls. So both ask first,
the way the dead-letter and schedule actions do, and the page lists what
will be released: each pause or breaker, since when, by whom, why, and the
due jobs it holds now. The dashboard's Resume and Close buttons post to the
same actions and land here too. The figures come from
services/console/status_holds.py, the dashboard's read model.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse

from django_jobretry.admin import rendering
from django_jobretry.display.humanize import count_of
from django_jobretry.models import Circuit, CircuitState, Pause
from django_jobretry.services.console.status_holds import holds_report

TEMPLATE = "admin/django_jobretry/holds/confirmation.html"
FOLLOWS = {
    "resume": "Their held jobs are claimed again at once, by every worker; the admin log records who "
    "resumed them.",
    "close": "Each breaker closes: its held jobs are claimed again at once, without a probe; if the "
    "task still fails, the breaker opens again. The admin log records who closed them.",
}


def confirmed(request: HttpRequest) -> bool:
    """Whether the request is the confirmation page's "Yes" (a POST carrying ``post=yes``)."""
    return request.method == "POST" and request.POST.get("post") == "yes"


def resume_page(model_admin: Any, request: HttpRequest, queryset: QuerySet[Pause]) -> TemplateResponse:
    """Resume these pauses? Each with its target, since when, by whom, why, until and the jobs held."""
    lines = {line.pause_id: line for line in holds_report().pauses}
    items = []
    for row in queryset.order_by("task_name", "queue_name"):
        line = lines.get(row.pk)
        items.append(
            {
                "pk": row.pk,
                "what": str(row),
                "since": rendering.time_text(row.paused_at),
                "by": row.paused_by,
                "why": row.reason or "no reason given",
                "until": rendering.time_text(row.until) if row.until else "resumed",
                "held": line.held if line else 0,
            }
        )
    return _page(model_admin, request, "resume", items)


def close_page(model_admin: Any, request: HttpRequest, queryset: QuerySet[Circuit]) -> TemplateResponse:
    """Close these breakers? Each with its task, state, since when, why, until and the jobs held."""
    lines = {line.task_name: line for line in holds_report().circuits}
    items = []
    for row in queryset.order_by("task_name"):
        line = lines.get(row.task_name)
        closed = row.state == CircuitState.CLOSED
        items.append(
            {
                "pk": row.task_name,
                "what": f"task {row.task_name}",
                "since": "" if closed else rendering.time_text(row.opened_at),
                "by": "closed already: nothing to do"
                if closed
                else f"the breaker ({row.get_state_display()})",
                "why": row.reason,
                "until": "" if closed else rendering.time_text(row.open_until),
                "held": line.held if line else 0,
            }
        )
    return _page(model_admin, request, "close", items)


def _page(model_admin: Any, request: HttpRequest, verb: str, items: list[dict[str, Any]]) -> TemplateResponse:
    opts = model_admin.opts
    noun = {"resume": ("pause", "pauses"), "close": ("breaker", "breakers")}[verb][len(items) != 1]
    held = sum(item["held"] for item in items)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Are you sure?",
        "subtitle": None,
        "opts": opts,
        "verb": verb,
        "question": f"{verb.capitalize()} {len(items)} {noun}, releasing {count_of(held, 'due job')}?",
        "follows": FOLLOWS[verb],
        "button": f"Yes, {verb}",
        "items": items,
        "action": request.POST.get("action", f"{verb}_selected"),
        "checkbox": helpers.ACTION_CHECKBOX_NAME,
        "cancel_url": reverse(f"{model_admin.admin_site.name}:{opts.app_label}_{opts.model_name}_changelist"),
        "media": model_admin.media,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, TEMPLATE, context)
