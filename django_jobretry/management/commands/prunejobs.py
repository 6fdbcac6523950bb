"""`manage.py prunejobs`: delete succeeded jobs older than a retention period.

Dead letters are not touched: they wait for an operator.
"""

from __future__ import annotations

import argparse
import re
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from django_jobretry.conf import jobretry_settings
from django_jobretry.services.retention import prune_succeeded

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def duration(text: str) -> timedelta:
    match = _DURATION.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30d, 12h, 15m or 90s")
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


class Command(BaseCommand):
    help = "Delete succeeded jobs finished longer ago than --older-than (dead letters are kept)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=duration,
            default=None,
            help="e.g. 7d, 12h (default: JOBRETRY SUCCEEDED_RETENTION_DAYS days)",
        )
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")

    def handle(self, *args: Any, older_than: timedelta | None, dry_run: bool, **options: Any) -> None:
        age = older_than or timedelta(days=jobretry_settings.succeeded_retention_days)
        count = prune_succeeded(age, dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        self.stdout.write(f"{verb} {count} succeeded job(s) finished more than {age} ago")
