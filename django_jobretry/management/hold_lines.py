"""How pauses and breakers read on a terminal and in JSON: `jobstatus`' Held section.

The read model is services/console/status_holds.py, the dashboard's and the
metrics' too. Names and reasons come from rows anyone with database access
can write: every cell is made printable (display/terminal.py ``table``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django_jobretry.display.terminal import table
from django_jobretry.services.console.status_holds import CircuitLine, HoldsReport, PauseLine


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def pause_json(line: PauseLine) -> dict[str, Any]:
    return {
        "kind": line.kind,
        "name": line.name,
        "paused_by": line.paused_by,
        "reason": line.reason,
        "paused_at": _time(line.paused_at),
        "until": _time(line.until),
        "held": line.held,
    }


def circuit_json(line: CircuitLine) -> dict[str, Any]:
    return {
        "task": line.task_name,
        "state": line.state,
        "opened_at": _time(line.opened_at),
        "open_until": _time(line.open_until),
        "opens": line.opens,
        "probe_job_id": line.probe_job_id,
        "reason": line.reason,
        "held": line.held,
    }


def as_json(report: HoldsReport) -> dict[str, Any]:
    """``pauses`` and ``circuits`` lists, empty when nothing is held."""
    return {
        "pauses": [pause_json(line) for line in report.pauses],
        "circuits": [circuit_json(line) for line in report.circuits],
    }


def status_lines(report: HoldsReport) -> list[str]:
    """The Held section: a row per pause ("paused by, why, until") and per breaker not closed, or none."""
    if not report.pauses and not report.circuits:
        return []
    rows = [
        (
            f"{line.kind} {line.name}",
            f"paused by {line.paused_by}" + (f" ({line.reason})" if line.reason else ""),
            "until " + (line.until.isoformat(timespec="seconds") if line.until else "resumed"),
            f"{line.held:,}",
        )
        for line in report.pauses
    ]
    rows += [
        (
            f"task {line.task_name}",
            f"circuit {'half-open' if line.state == 'half_open' else 'open'}: {line.reason}",
            (
                f"probe job {line.probe_job_id}"
                if line.state == "half_open"
                else f"until {line.open_until.isoformat(timespec='seconds') if line.open_until else '?'}"
                f" (opening {line.opens})"
            ),
            f"{line.held:,}",
        )
        for line in report.circuits
    ]
    title = f"Held: {len(report.pauses)} paused, {len(report.circuits)} circuit(s) open"
    return [title, *table(("what", "why", "until", "held jobs"), rows, {3})]
