"""How schedules read on a terminal and in JSON: `jobstatus`' Schedules section and `manage.py schedules`.

Both show the read model of services/console/status_schedules.py, the
admin's too, so the three never disagree. A next slot is shown in the
schedule's own time zone, where its cron is read (an operator thinks "the
03:00 Berlin run"), and in UTC. Names, tasks and pause reasons come from rows
anyone with database access can write: every cell is made printable
(display/terminal.py ``table``). Schedule arguments are never shown.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django_jobretry.display.humanize import humanize_delay
from django_jobretry.display.terminal import table
from django_jobretry.services.console import status_schedules
from django_jobretry.services.console.status_schedules import ScheduleState, utc, zoned

NOT_DECLARED = "not declared in this deploy"
NOT_STARTED = "no worker has started it yet"


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else round(value.total_seconds(), 3)


def read() -> list[ScheduleState]:
    """`jobstatus`' read: every schedule row and declaration (features.py)."""
    return status_schedules.listing()[1]


def list_json(states: list[ScheduleState]) -> list[dict[str, Any]]:
    """`jobstatus --json`'s "schedules": a list, empty when there are none (a script need not test for it)."""
    return [as_json(state) for state in states]


def as_json(state: ScheduleState) -> dict[str, Any]:
    """One schedule as plain JSON values: times in ISO 8601 with their offset, ages in seconds."""
    last = state.last
    return {
        "name": state.name,
        "task": state.task,
        "cadence": state.cadence,
        "declared": state.declared,
        "declared_cadence": state.declared_cadence,
        "time_zone": state.zone,
        "started": state.has_row,
        "next_slot": _time(state.next_slot),
        "period_seconds": _seconds(state.period),
        "last_slot": _time(last.slot),
        "last_job_id": last.job_id,
        "last_outcome": last.outcome,
        "last_outcome_detail": last.detail,
        "last_dead_letter_id": last.dead_letter_id,
        "last_success_at": _time(state.last_success_at),
        "last_success_age_seconds": _seconds(state.last_success_age),
        "runs": state.runs,
        "skipped": state.skipped,
        "missed": state.missed,
        "refused": state.refused,
        "paused": state.paused_at is not None,
        "paused_at": _time(state.paused_at),
        "paused_by": state.paused_by,
        "pause_reason": state.pause_reason,
    }


def name_cell(state: ScheduleState) -> str:
    """The name, and why nothing runs it if nothing does."""
    if not state.declared:
        return f"{state.name} ({NOT_DECLARED})"
    return state.name if state.has_row else f"{state.name} ({NOT_STARTED})"


def cadence_cell(state: ScheduleState) -> str:
    """The cadence the workers follow; this deploy's too while a worker of it has not started."""
    if state.declared_cadence is None or state.declared_cadence == state.cadence:
        return state.cadence
    return f"{state.cadence} (this deploy: {state.declared_cadence})"


def next_cell(state: ScheduleState) -> str:
    """The next slot in the schedule's zone, and in UTC when that is another zone."""
    if state.next_slot is None:
        return "-"
    if state.zone is None or state.zone == "UTC":
        return utc(state.next_slot)
    return f"{zoned(state.next_slot, state.zone)} ({utc(state.next_slot)})"


def success_cell(state: ScheduleState) -> str:
    if state.last_success_at is None or state.last_success_age is None:
        return "never"
    return f"{utc(state.last_success_at)} ({humanize_delay(state.last_success_age)} ago)"


def last_cell(state: ScheduleState) -> str:
    """The last run's slot, job and outcome: "2026-12-02 03:00:00 UTC job 12: dead (exhausted)"."""
    last = state.last
    if last.job_id is None:
        return str(last)
    where = f"dead letter {last.dead_letter_id}" if last.dead_letter_id is not None else f"job {last.job_id}"
    slot = utc(last.slot) if last.slot is not None else "-"
    return f"{slot} {where}: {last}"


def paused_cell(state: ScheduleState) -> str:
    if state.paused_at is None:
        return "-"
    reason = f": {state.pause_reason}" if state.pause_reason else ""
    return f"since {utc(state.paused_at)} by {state.paused_by or '?'}{reason}"


def status_lines(states: list[ScheduleState]) -> list[str]:
    """`jobstatus`' Schedules section: each one's next slot, last success, counts and pause, or none."""
    if not states:
        return []
    paused = sum(1 for state in states if state.paused_at is not None)
    header = ("schedule", "next slot", "last success", "runs", "skipped", "missed", "paused")
    rows = [
        (
            name_cell(state),
            next_cell(state),
            success_cell(state),
            f"{state.runs:,}",
            f"{state.skipped:,}",
            f"{state.missed:,}",
            paused_cell(state),
        )
        for state in states
    ]
    return [f"Schedules: {len(states)}, {paused} paused", *table(header, rows, {3, 4, 5})]


def listing_lines(states: list[ScheduleState]) -> list[str]:
    """`manage.py schedules`: every declared schedule and every row, one per line."""
    if not states:
        return [
            'No schedules: none is declared (@job(schedule=...), JOBRETRY["SCHEDULES"]) and no row exists.'
        ]
    header = (
        *("schedule", "task", "cadence", "next slot", "last run"),
        *("last success", "runs", "skipped", "missed", "refused", "paused"),
    )
    rows = [
        (
            name_cell(state),
            state.task,
            cadence_cell(state),
            next_cell(state),
            last_cell(state),
            success_cell(state),
            f"{state.runs:,}",
            f"{state.skipped:,}",
            f"{state.missed:,}",
            f"{state.refused:,}",
            paused_cell(state),
        )
        for state in states
    ]
    return table(header, rows, {6, 7, 8, 9})
