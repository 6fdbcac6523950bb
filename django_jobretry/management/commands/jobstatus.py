"""`manage.py jobstatus`: queues, retrying and dead jobs, queue latency and workers, on one screen.

What an operator asks first in an incident - what is failing, how late is
each queue, which workers are alive - answered without SQL and without the
admin, from the same cheap, index-backed reads as the admin dashboard.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandParser

from django_jobretry.management import status_report
from django_jobretry.management.arguments import add_jobstatus_arguments
from django_jobretry.management.database import DatabaseCommand


class Command(DatabaseCommand):
    help = (
        "Show each queue's ready, retrying, running and dead jobs, its oldest due job and longest "
        "running one, and the live and lost workers."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_jobstatus_arguments(parser)

    def handle(self, *args: Any, as_json: bool, **options: Any) -> None:
        report = status_report.read()
        if as_json:
            # ASCII only: a control character in a name is written as its \u escape, so the
            # terminal never receives it, and a script still reads the name exactly as stored.
            self.stdout.write(json.dumps(status_report.as_json(report), indent=2, ensure_ascii=True))
        else:
            self.stdout.write(status_report.as_text(report))
