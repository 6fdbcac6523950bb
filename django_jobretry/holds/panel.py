"""The dashboard's Held panel, and the "are you sure?" page before resuming pauses or closing breakers.

At 3 a.m. the first question after "what is dying" is "what is holding work
back, since when, and who did it": a pause (an operator), a breaker (the
task's failures), a limit (its declaration). The Held panel shows each with
its age to the second, and pauses and breakers with their way out beside
them: a button that posts to the Pauses or Circuit breakers page's own
action (holds/admin.py), which checks ``pause_work`` on the server. The
buttons are shown only to users holding that permission; nothing here
changes state on a GET.

Resuming a queue or closing a breaker lets every job it held run at once:
after a partner's outage that can be thousands of calls. So both ask first,
the way the dead-letter and schedule actions do, and the page lists what
will be released: each pause or breaker, since when, by whom, why, and the
due jobs it holds now. The dashboard's Resume and Close buttons post to the
same actions and land here too. The figures come from holds/__init__.py and
limits/status.py, the read models `jobstatus` uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from django_jobretry.admin import rendering
from django_jobretry.admin.base import holds as may
from django_jobretry.display import count_of
from django_jobretry.features import Page
from django_jobretry.holds import CircuitLine, PauseLine, anything_held, holds_report
from django_jobretry.limits import status as limits_status
from django_jobretry.models import Circuit, CircuitState, Pause

#: What Resume and Close need, with the view permission of their page (holds/admin.py checks both).
PAUSE_WORK = "django_jobretry.pause_work"

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


# -- the dashboard's Held panel -------------------------------------------------------------------
@dataclass(frozen=True)
class Action:
    """A button posting one row to a changelist action, which asks for confirmation first."""

    url: str
    action: str
    value: str
    label: str


@dataclass(frozen=True)
class HeldRow:
    """One held thing: what, its state, since when (and how long), by whom, why, until, jobs held."""

    kind: str  # "pause", "breaker" or "limit"
    what: str
    state: str
    since: SafeString | str
    age: str
    by: str
    why: str
    until: SafeString | str
    held: int
    action: Action | None = None


def _pause_row(line: PauseLine, now: datetime, action: Action | None) -> HeldRow:
    return HeldRow(
        "pause",
        f"{line.kind} {line.name}",
        "paused",
        *rendering.since(line.paused_at, now),
        line.paused_by,
        line.reason or "no reason given",
        rendering.time_html(line.until) if line.until else "resumed",
        line.held,
        action,
    )


def _breaker_row(line: CircuitLine, now: datetime, action: Action | None) -> HeldRow:
    half_open = line.state == CircuitState.HALF_OPEN
    return HeldRow(
        "breaker",
        f"task {line.task_name}",
        "breaker half-open" if half_open else "breaker open",
        *rendering.since(line.opened_at, now),
        "the breaker",
        line.reason,
        f"probe job {line.probe_job_id} succeeds"
        if half_open
        else format_html("{} (opening {})", rendering.time_html(line.open_until), line.opens),
        line.held,
        action,
    )


def _limit_row(line: limits_status.LimitLine, now: datetime) -> HeldRow:
    return HeldRow(
        "limit",
        f"{line.kind} {line.name}",
        "at its limit" if line.full else "waiting for a slot",
        *rendering.since(line.waiting_since, now),
        "its declared limit",
        line.declared,
        "a slot frees",
        line.held,
    )


def held_panel(page: Page) -> dict[str, Any] | None:
    """Pauses in force, breakers not closed, limits holding due jobs; None when nothing is held."""
    request, site, now = page.request, page.site, page.now
    waiting = [line for line in page.read(limits_status.limits_report) if line.held]
    if not waiting and not anything_held():
        return None
    report = holds_report()
    resumes, closes = _may_act(request, Pause), _may_act(request, Circuit)
    pauses_url = reverse(f"{site}:django_jobretry_pause_changelist")
    breakers_url = reverse(f"{site}:django_jobretry_circuit_changelist")
    rows = [
        _pause_row(
            line,
            now,
            Action(pauses_url, "resume_selected", str(line.pause_id), "Resume…") if resumes else None,
        )
        for line in report.pauses
    ]
    rows += [
        _breaker_row(
            line, now, Action(breakers_url, "close_selected", line.task_name, "Close…") if closes else None
        )
        for line in report.circuits
    ]
    rows += [_limit_row(line, now) for line in waiting]
    return {
        "rows": rows,
        "pauses": len(report.pauses),
        "breakers": len(report.circuits),
        "limits": len(waiting),
        "actions": any(row.action for row in rows),
        "pauses_url": pauses_url,
        "circuits_url": breakers_url,
        "held_url": reverse(f"{site}:django_jobretry_job_changelist") + "?held=yes",
    }


def _may_act(request: HttpRequest, model: type[Pause] | type[Circuit]) -> bool:
    """``pause_work``, and the view permission of the page whose action the button posts to."""
    return request.user.has_perm(PAUSE_WORK) and may(request, model._meta, "view")
