"""The dashboard's capability panels: what each is built for (:class:`Page`), and the schedules' panel.

Each panel is one function of the :class:`Page` returning its include's
context (None: the panel is not shown) and one template include; the
dashboard builds them from features.py's list. The Held panel is the
holds' (holds/panel.py), the Limits panel the limits' (limits/faces.py).
Nothing here changes state on a GET. The figures come from the read models
`jobstatus` uses (services/console/status_schedules.py).
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
from django_jobretry.models import Schedule
from django_jobretry.services.console import status_schedules

_T = TypeVar("_T")


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


def since(moment: datetime | None, now: datetime) -> tuple[SafeString | str, str]:
    """A time to the second (wrapping between date and time only) and its age ("1h04m05s"); "" for None."""
    if moment is None:
        return "", ""
    return rendering.time_html(moment), humanize_age(max(now - moment, timedelta(0)))


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
