"""The dashboard's panels on what holds work back: what is held, the schedules, the limits.

At 3 a.m. the first question after "what is dying" is "what is holding work
back, since when, and who did it": a pause (an operator), a breaker (the
task's failures), a limit (its declaration). Each held thing has its age to
the second, and pauses and breakers have their way out beside them: a
button that posts to the Pauses or Circuit breakers page's own action
(admin/holds.py), which checks ``pause_work`` on the server and asks "are
you sure?" before it changes anything. The buttons are shown only to users
holding that permission; nothing here changes state on a GET.

Each panel is one function of the :class:`Page` returning its include's
context (None: the panel is not shown) and one template include; the
dashboard builds them from features.py's list. The figures come from the
read models `jobstatus` uses (services/console/status_holds.py,
status_schedules.py, status_limits.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from django.contrib.admin.utils import quote
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from django_jobretry.admin import rendering
from django_jobretry.admin.base import holds as may
from django_jobretry.display.humanize import humanize_age
from django_jobretry.models import Circuit, CircuitState, Pause, Schedule
from django_jobretry.services.console import status_limits, status_schedules
from django_jobretry.services.console.status_holds import CircuitLine, PauseLine, anything_held, holds_report

_T = TypeVar("_T")

#: What Resume and Close need, with the view permission of their page (admin/holds.py checks both).
PAUSE_WORK = "django_jobretry.pause_work"


@dataclass
class Page:
    """What a panel is built for: the request, the admin site's name, the database's now."""

    request: HttpRequest
    site: str
    now: datetime
    _reads: dict[Callable[[], object], object] = field(default_factory=dict)

    def read(self, reader: Callable[[], _T]) -> _T:
        """``reader()``, once per page: panels showing the same report share one read of it."""
        if reader not in self._reads:
            self._reads[reader] = reader()
        return cast(_T, self._reads[reader])


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


def since(moment: datetime | None, now: datetime) -> tuple[SafeString | str, str]:
    """A time to the second (wrapping between date and time only) and its age ("1h04m05s"); "" for None."""
    if moment is None:
        return "", ""
    return rendering.time_html(moment), humanize_age(max(now - moment, timedelta(0)))


def _pause_row(line: PauseLine, now: datetime, action: Action | None) -> HeldRow:
    return HeldRow(
        "pause",
        f"{line.kind} {line.name}",
        "paused",
        *since(line.paused_at, now),
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
        *since(line.opened_at, now),
        "the breaker",
        line.reason,
        f"probe job {line.probe_job_id} succeeds"
        if half_open
        else format_html("{} (opening {})", rendering.time_html(line.open_until), line.opens),
        line.held,
        action,
    )


def _limit_row(line: status_limits.LimitLine, now: datetime) -> HeldRow:
    return HeldRow(
        "limit",
        f"{line.kind} {line.name}",
        "at its limit" if line.full else "waiting for a slot",
        *since(line.waiting_since, now),
        "its declared limit",
        _limit_text(line),
        "a slot frees",
        line.held,
    )


def held_panel(page: Page) -> dict[str, Any] | None:
    """Pauses in force, breakers not closed, limits holding due jobs; None when nothing is held."""
    request, site, now = page.request, page.site, page.now
    waiting = [line for line in page.read(status_limits.limits_report) if line.held]
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


def schedules_panel(page: Page) -> dict[str, Any] | None:
    """Schedules that are late, failing or paused, for users who may view schedules; None otherwise."""
    site = page.site
    if not may(page.request, Schedule._meta, "view"):
        return None
    now, states = status_schedules.listing()
    rows = []
    for state in states:
        found = status_schedules.troubles(state, now)
        if found:
            rows.append(
                {
                    "state": state,
                    "troubles": [status_schedules.TROUBLES[key] for key in found],
                    "next": status_schedules.utc(state.next_slot) if state.next_slot else "-",
                    "success": _success(state, now),
                    "last": str(state.last),
                    "paused_since": since(state.paused_at, now),
                    "url": reverse(f"{site}:django_jobretry_schedule_change", args=[quote(state.name)])
                    if state.has_row
                    else None,
                }
            )
    return {
        "rows": rows,
        "total": len(states),
        "url": reverse(f"{site}:django_jobretry_schedule_changelist"),
    }


def _success(state: status_schedules.ScheduleState, now: datetime) -> SafeString | str:
    if state.last_success_at is None:
        return "never"
    moment, age = since(state.last_success_at, now)
    return format_html("{} ({} ago)", moment, age)


def limits_panel(page: Page) -> dict[str, Any] | None:
    """Every declared limit: running / limit, keys at their limit, jobs waiting; None without limits.

    A key is made of a job's arguments (``concurrency_key="tenant:{tenant_id}"``),
    so the busiest keys are named only to holders of ``view_job_payload``.
    """
    limits = page.read(status_limits.limits_report)
    if not limits:
        return None
    return {
        "rows": [{"line": line, "limit": _limit_text(line)} for line in limits],
        "full": sum(1 for line in limits if line.full),
        "waiting": sum(line.held for line in limits),
        "show_keys": page.request.user.has_perm(rendering.PAYLOAD_PERMISSION),
    }


def _limit_text(line: status_limits.LimitLine) -> str:
    """ "4 at once", "1 at once per key; 60/s (burst 1)": the limit as declared."""
    parts = []
    if line.concurrency is not None:
        parts.append(f"{line.concurrency} at once" + (" per key" if line.per_key else ""))
    if line.rate:
        parts.append(line.rate)
    return "; ".join(parts)
