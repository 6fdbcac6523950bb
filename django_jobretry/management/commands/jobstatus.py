"""`manage.py jobstatus`: queues, retrying and dead jobs, queue latency, workers, each capability's section.

What an operator asks first in an incident - what is failing, how late is
each queue, which workers are alive - answered without SQL and without the
admin, from the same cheap, index-backed reads as the admin dashboard.
Then each capability of features.py gets its section, in that list's order,
when it has something to show (schedules when any is declared or has a row;
pauses and breakers not closed; declared limits), and its key in the JSON
always, an empty list or object when there is nothing, so a script need not
test for it: "schedules", "held" (its "pauses" and "circuits"), "limits".
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandParser

from django_jobretry import features
from django_jobretry.management import status_report
from django_jobretry.management.arguments import add_jobstatus_arguments
from django_jobretry.management.database import DatabaseCommand


class Command(DatabaseCommand):
    help = (
        "Show each queue's ready, retrying, running and dead jobs, its oldest due job and longest "
        "running one, the live and lost workers, and each schedule's next slot and last success."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_jobstatus_arguments(parser)

    def handle(self, *args: Any, as_json: bool, **options: Any) -> None:
        report = status_report.read()
        sections = [feature.status for feature in features.FEATURES if feature.status is not None]
        reports = [(section, features.load(section.read)()) for section in sections]
        if as_json:
            found = {
                **status_report.as_json(report),
                **{section.key: features.load(section.as_json)(read) for section, read in reports},
            }
            # ASCII only: a control character in a name is written as its \u escape, so the
            # terminal never receives it, and a script still reads the name exactly as stored.
            self.stdout.write(json.dumps(found, indent=2, ensure_ascii=True))
        else:
            self.stdout.write(status_report.as_text(report))
            for section, read in reports:
                lines = features.load(section.lines)(read)
                if lines:
                    self.stdout.write("\n".join(["", *lines]))
