"""The dashboard's "What is dying" panel: per task and per error class, each figure a link.

A count is of deaths (console/deaths.py); its link opens the dead-letter
list filtered the same way (task or error class, died since then), which
shows the dead letters still kept: those requeued or discarded since are
counted here but no longer listed there. "Retrying now" opens the job list's
retrying jobs of that task.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.urls import reverse
from django.utils.http import urlencode

from django_jobretry.console import status
from django_jobretry.console.deaths import Deaths, Dying

#: Rows of each table; the rest are counted in a line below it.
ROWS_SHOWN = 15
#: What a death without an exception (lease lost, cancelled) is listed as among the error classes.
NO_EXCEPTION = "(none: lease lost or cancelled)"


@dataclass(frozen=True)
class Link:
    """A count and the list it leads to (None: nothing to list, the count is 0)."""

    count: status.Count
    url: str | None


def _link(count: status.Count, base: str, query: dict[str, str] | None) -> Link:
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
