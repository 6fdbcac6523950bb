"""`manage.py jobstatus` output: the operator's first look, as text for people and JSON for scripts.

The figures come from console/status.py and console/workers.py, the same
as the admin dashboard's, so the two never disagree. Nothing here reads or
prints job arguments.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from django_jobretry.console import status, workers
from django_jobretry.display.humanize import humanize_delay
from django_jobretry.management.terminal_text import printable

COUNTS = ("ready", "retrying", "dead")


@dataclass(frozen=True)
class Report:
    """Everything `jobstatus` shows, read in one go."""

    queues: list[status.QueueStatus]
    totals: status.Totals
    workers: list[workers.WorkerState]


def read() -> Report:
    rows = status.queues()
    return Report(rows, status.totals(rows), workers.listing())


def _seconds(delay: timedelta | None) -> float | None:
    return None if delay is None else round(delay.total_seconds(), 3)


def _counts(source: Any) -> dict[str, Any]:
    """ready / retrying / dead as numbers (null: not counted), and which stopped at the limit."""
    counts: dict[str, status.Count] = {name: getattr(source, name) for name in COUNTS}
    return {
        **{name: count.value for name, count in counts.items()},
        "running": source.running,
        "more_than_limit": [name for name, count in counts.items() if count.more],
    }


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _worker(row: workers.WorkerState) -> dict[str, Any]:
    return {
        "worker_id": row.worker_id,
        "status": "live" if row.live else "lost",
        "host": row.host,
        "pid": row.pid,
        "queues": row.queues,
        "concurrency": row.concurrency,
        "pool": row.pool,
        "version": row.version,
        "lease_seconds": _seconds(row.lease),
        "started_at": _time(row.started_at),
        "last_heartbeat_at": _time(row.last_heartbeat_at),
        "heartbeat_age_seconds": _seconds(row.heartbeat_age),
        "running_jobs": row.running_jobs,
    }


def as_json(report: Report) -> dict[str, Any]:
    """The report as plain JSON values; ages in seconds, times in ISO 8601 with their offset."""
    totals = report.totals
    live = sum(1 for row in report.workers if row.live)
    return {
        "as_of": _time(totals.now),
        "count_limit": status.COUNT_LIMIT,
        "queues": [
            {
                "queue": row.queue,
                **_counts(row),
                "oldest_due_seconds": _seconds(row.oldest_due),
                "longest_running_seconds": _seconds(row.longest_running),
                "longest_running_job_id": row.longest_running_job,
            }
            for row in report.queues
        ],
        "totals": _counts(totals),
        "dead_by_reason": {reason: count.value for reason, count in totals.dead_by_reason.items()},
        "succeeded_last_hour": totals.succeeded_last_hour.value,
        "workers_live": live,
        "workers_lost": len(report.workers) - live,
        "workers": [_worker(row) for row in report.workers],
    }


def table(header: Sequence[str], rows: Sequence[Sequence[str]], numbers: Collection[int]) -> list[str]:
    """Aligned columns; the ``numbers`` columns to the right.

    Every cell is made printable first: queue names and workers' ids come
    from rows anyone with database access can write, and a terminal would
    execute the control sequences in them.
    """
    cells = [[printable(cell, one_line=True) for cell in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [
        "  ".join(
            (cell.rjust(width) if index in numbers else cell.ljust(width))
            for index, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in cells
    ]


def _age(delay: timedelta | None) -> str:
    return "-" if delay is None else humanize_delay(delay)


def _clock(value: datetime | None) -> str:
    return "-" if value is None else timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S")


def _queue_lines(report: Report) -> list[str]:
    totals = report.totals
    header = ("queue", "ready", "retrying", "running", "dead", "oldest due", "longest running")
    rows = [
        (
            row.queue,
            str(row.ready),
            str(row.retrying),
            f"{row.running:,}",
            str(row.dead),
            _age(row.oldest_due),
            _age(row.longest_running)
            + (f" (job {row.longest_running_job})" if row.longest_running_job is not None else ""),
        )
        for row in report.queues
    ]
    if len(rows) > 1:
        counts = (str(totals.ready), str(totals.retrying), f"{totals.running:,}", str(totals.dead))
        rows.append(("all queues", *counts, "", ""))
    return table(header, rows, range(1, 7)) if rows else ["No jobs and no dead letters."]


def _worker_lines(report: Report) -> list[str]:
    live = sum(1 for row in report.workers if row.live)
    lines = [f"Workers: {live} live, {len(report.workers) - live} lost"]
    if not report.workers:
        return [*lines, "No worker has registered: is `manage.py runworker` running?"]
    header = ("status", "worker", "queues", "concurrency", "pool", "running", "started", "last heartbeat")
    rows = [
        (
            "live" if row.live else "LOST",
            row.worker_id,
            workers.queue_list(row.queues),
            str(row.concurrency),
            row.pool,
            str(row.running_jobs),
            _clock(row.started_at),
            "-" if row.heartbeat_age is None else f"{humanize_delay(row.heartbeat_age)} ago",
        )
        for row in report.workers
    ]
    return [*lines, *table(header, rows, {3, 5})]


def as_text(report: Report) -> str:
    totals = report.totals
    reasons = ", ".join(f"{reason} {count}" for reason, count in totals.dead_by_reason.items())
    return "\n".join(
        [
            f"As of {_clock(totals.now)} (database clock); counts stop at {status.COUNT_LIMIT:,}",
            "",
            *_queue_lines(report),
            "",
            f"Dead letters by reason: {reasons}",
            f"Succeeded in the last hour: {totals.succeeded_last_hour}",
            "",
            *_worker_lines(report),
        ]
    )
