"""How far the running jobs got, for operators: `jobstatus`' Progress section and its JSON (docs/progress.md).

The running jobs that reported progress (``progress()``, jobs/progress.py),
the :data:`SHOWN` that reported last first: what is moving now. One query on
the running jobs, which the lease index (``jobretry_job_lease``) holds: there
are as many as the workers run at once, never the backlog. The notes are the
jobs' own words; the text section prints them through ``display.table``,
which neutralises what a terminal would execute.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from django_jobretry.display import progress_words, table
from django_jobretry.models import Job, JobStatus

#: Running jobs named: the ones that reported last.
SHOWN = 20
#: Characters of a note in the text section (the JSON has it whole).
NOTE_CHARS = 60


@dataclass(frozen=True)
class Reported:
    """One running job's progress, as its attempt last wrote it."""

    job_id: int
    task_name: str
    queue_name: str
    attempt: int
    done: int
    total: int | None
    note: str
    reported_at: datetime


def running_progress() -> list[Reported]:
    """The running jobs that reported progress, the :data:`SHOWN` that reported last."""
    rows = (
        Job.objects.filter(status=JobStatus.RUNNING, progress_done__isnull=False, progress_at__isnull=False)
        .order_by("-progress_at", "-id")
        .values_list(
            "id",
            "task_name",
            "queue_name",
            "attempts",
            "progress_done",
            "progress_total",
            "progress_note",
            "progress_at",
        )[:SHOWN]
    )
    return [
        Reported(job_id, task, queue, attempt, done, total, note or "", at)
        for job_id, task, queue, attempt, done, total, note, at in rows
        if done is not None and at is not None  # always, by the filter: for the type checker
    ]


def as_json(report: list[Reported]) -> list[dict[str, Any]]:
    """`jobstatus --json`'s "progress": one object per job, the note whole, the time in ISO 8601."""
    return [
        {
            "job_id": line.job_id,
            "task": line.task_name,
            "queue": line.queue_name,
            "attempt": line.attempt,
            "done": line.done,
            "total": line.total,
            "note": line.note,
            "reported_at": line.reported_at.isoformat(),
        }
        for line in report
    ]


def status_lines(report: list[Reported]) -> list[str]:
    """The Progress section: one line a running job that reported; none when no job did."""
    if not report:
        return []
    rows = [
        (
            str(line.job_id),
            line.task_name,
            line.queue_name,
            progress_words(line.done, line.total),
            line.note if len(line.note) <= NOTE_CHARS else line.note[: NOTE_CHARS - 3] + "...",
            timezone.localtime(line.reported_at).strftime("%H:%M:%S"),
        )
        for line in report
    ]
    heading = (
        f"Progress of running jobs (the {SHOWN} that reported last):" if len(rows) == SHOWN else "Progress:"
    )
    return [heading, *table(("job", "task", "queue", "progress", "note", "reported"), rows, {0})]
