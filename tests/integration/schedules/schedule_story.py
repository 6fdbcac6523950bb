"""Schedules in every state an operator meets, reached through the real services, for the operator tests.

The admin, `manage.py schedules`, `jobstatus` and the metrics tests read
the same story:

- ``nightly``: a cron in Europe/Berlin whose run died (a fatal error): its
  last run is a dead letter;
- ``tick``: every 5 minutes, whose run succeeded: it has a last success;
- ``hourly``: paused by "alice", with a reason;
- ``retired``: a row no declaration in this deploy names (left from an older one).

Runs are made with ``run_now`` and run by ``django_jobretry.testing.run_jobs``
(the worker's own claim, runner and recorder), so the rows are what a
worker leaves behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django_jobretry.models import DeadLetter, Schedule
from django_jobretry.schedules import declared
from django_jobretry.schedules.rows import declare_rows, pause, run_now
from django_jobretry.testing import run_jobs
from tests.factories import ScheduleFactory

#: A schedule argument no operator without view_job_payload may see.
SECRET = "card-4111-1111-1111-1111"  # noqa: S105 - a test value, not a secret
DECLARED = {
    "nightly": {
        "task": "tests.jobs_app.jobs.fatal",
        "cron": "0 3 * * *",
        "tz": "Europe/Berlin",
        "args": [SECRET],
    },
    "tick": {"task": "tests.jobs_app.jobs.record", "every": 300, "args": ["tick"]},
    "hourly": {"task": "tests.jobs_app.jobs.record", "every": 3600, "args": ["hourly"]},
}
PAUSE_REASON = "partner maintenance until 06:00"


def declare(settings: Any, **extra: dict[str, Any]) -> None:
    """Declare the story's schedules (and ``extra``) in JOBRETRY["SCHEDULES"] for this test."""
    settings.JOBRETRY = {**settings.JOBRETRY, "SCHEDULES": {**DECLARED, **extra}}


@dataclass(frozen=True)
class Story:
    dead_job_id: int
    dead_letter_id: int
    succeeded_job_id: int

    def row(self, name: str) -> Schedule:
        return Schedule.objects.get(name=name)


def story(settings: Any) -> Story:
    """The four schedules above, in their states."""
    declare(settings)
    declare_rows(declared())
    dead = run_now("nightly", actor="tester")
    succeeded = run_now("tick", actor="tester")
    run_jobs()
    pause("hourly", actor="alice", reason=PAUSE_REASON)
    ScheduleFactory.create(name="retired", task_name="old.jobs.report", cadence="cron 0 4 * * * UTC")
    dead_letter = DeadLetter.objects.get(job_id=dead)
    return Story(dead_job_id=dead, dead_letter_id=dead_letter.pk, succeeded_job_id=succeeded)
