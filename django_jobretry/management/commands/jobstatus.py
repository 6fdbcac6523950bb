"""`manage.py jobstatus`: queues, retrying and dead jobs, queue latency, workers and schedules, on one screen.

What an operator asks first in an incident - what is failing, how late is
each queue, which workers are alive - answered without SQL and without the
admin, from the same cheap, index-backed reads as the admin dashboard.
Schedules get a section when any is declared or has a row (one query for
all of them, services/console/status_schedules.py); the JSON always has a
"schedules" list, empty when there are none, so a script need not test for it.
Pauses and open circuit breakers get a Held section when there are any;
the JSON always has "held" with its "pauses" and "circuits" lists.
Declared concurrency and rate limits get a Limits section (running / limit,
held); the JSON always has a "limits" list.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandParser

from django_jobretry.management import hold_lines, limit_lines, schedule_lines, status_report
from django_jobretry.management.arguments import add_jobstatus_arguments
from django_jobretry.management.database import DatabaseCommand
from django_jobretry.services.console import status_holds, status_limits, status_schedules


class Command(DatabaseCommand):
    help = (
        "Show each queue's ready, retrying, running and dead jobs, its oldest due job and longest "
        "running one, the live and lost workers, and each schedule's next slot and last success."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_jobstatus_arguments(parser)

    def handle(self, *args: Any, as_json: bool, **options: Any) -> None:
        report = status_report.read()
        _, schedules = status_schedules.listing()
        holds = status_holds.holds_report()
        limits = status_limits.limits_report()
        if as_json:
            found = {
                **status_report.as_json(report),
                "schedules": [schedule_lines.as_json(state) for state in schedules],
                "held": hold_lines.as_json(holds),
                "limits": limit_lines.as_json(limits),
            }
            # ASCII only: a control character in a name is written as its \u escape, so the
            # terminal never receives it, and a script still reads the name exactly as stored.
            self.stdout.write(json.dumps(found, indent=2, ensure_ascii=True))
        else:
            self.stdout.write(status_report.as_text(report))
            if schedules:
                self.stdout.write("\n".join(["", *schedule_lines.status_lines(schedules)]))
            if holds.pauses or holds.circuits:
                self.stdout.write("\n".join(["", *hold_lines.status_lines(holds)]))
            if limits:
                self.stdout.write("\n".join(["", *limit_lines.status_lines(limits)]))
