"""`manage.py jobstatus`: queues, retrying and dead jobs, queue latency, workers, each capability's section.

What an operator asks first in an incident - what is failing, how late is
each queue, which workers are alive - answered without SQL and without the
admin, from the same cheap, index-backed reads as the admin dashboard.
Then each capability of features.py gets its section, in that list's order,
when it has something to show (schedules when any is declared or has a row;
pauses and breakers not closed; declared limits), and its key in the JSON
always, an empty list or object when there is nothing, so a script need not
test for it: "schedules", "held" (its "pauses" and "circuits"), "limits",
"flows" (the counts by state and the blocked flows).

The text for people and the JSON for scripts are written below the command.
The figures come from console/__init__.py and console/workers.py, the same as
the admin dashboard's, so the two never disagree. Nothing here reads or
prints job arguments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import CommandParser
from django.utils import timezone

from django_jobretry import console, features
from django_jobretry.console import workers
from django_jobretry.display import humanize_delay, table
from django_jobretry.management.cli import DatabaseCommand

COUNTS = ("ready", "retrying", "dead")


class Command(DatabaseCommand):
    help = (
        "Show each queue's ready, retrying, running and dead jobs, its oldest due job and longest "
        "running one, the live and lost workers, and each schedule's next slot and last success."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--json",
            action="store_true",
            dest="as_json",
            help="print one JSON object (for scripts and monitoring) instead of text",
        )

    def handle(self, *args: Any, as_json: bool, **options: Any) -> None:
        report = read_report()
        sections = [feature.status for feature in features.FEATURES if feature.status is not None]
        reports = [(section, features.load(section.read)()) for section in sections]
        if as_json:
            found = {
                **report_json(report),
                **{section.key: features.load(section.as_json)(read) for section, read in reports},
            }
            # ASCII only: a control character in a name is written as its \u escape, so the
            # terminal never receives it, and a script still reads the name exactly as stored.
            self.stdout.write(json.dumps(found, indent=2, ensure_ascii=True))
        else:
            self.stdout.write(report_text(report))
            for section, read in reports:
                lines = features.load(section.lines)(read)
                if lines:
                    self.stdout.write("\n".join(["", *lines]))


@dataclass(frozen=True)
class Report:
    """Everything `jobstatus` shows, read in one go."""

    queues: list[console.QueueStatus]
    totals: console.Totals
    workers: list[workers.WorkerState]


def read_report() -> Report:
    rows = console.queues()
    return Report(rows, console.totals(rows), workers.listing())


def _seconds(delay: timedelta | None) -> float | None:
    return None if delay is None else round(delay.total_seconds(), 3)


def _counts(source: Any) -> dict[str, Any]:
    """ready / retrying / dead as numbers (null: not counted), and which stopped at the limit."""
    counts: dict[str, console.Count] = {name: getattr(source, name) for name in COUNTS}
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


def report_json(report: Report) -> dict[str, Any]:
    """The report as plain JSON values; ages in seconds, times in ISO 8601 with their offset."""
    totals = report.totals
    live = sum(1 for row in report.workers if row.live)
    return {
        "as_of": _time(totals.now),
        "count_limit": console.COUNT_LIMIT,
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


def report_text(report: Report) -> str:
    totals = report.totals
    reasons = ", ".join(f"{reason} {count}" for reason, count in totals.dead_by_reason.items())
    return "\n".join(
        [
            f"As of {_clock(totals.now)} (database clock); counts stop at {console.COUNT_LIMIT:,}",
            "",
            *_queue_lines(report),
            "",
            f"Dead letters by reason: {reasons}",
            f"Succeeded in the last hour: {totals.succeeded_last_hour}",
            "",
            *_worker_lines(report),
        ]
    )
