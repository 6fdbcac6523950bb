"""`manage.py prunejobs`: delete succeeded jobs older than a retention period.

Dead letters are kept until an operator acts, unless DEAD_LETTER_RETENTION_DAYS
is set or --dead-letters-older-than is given; then they are pruned by age
(never by count), with a log line and a signal listing what goes.

Workflows go with their jobs: a flow's succeeded jobs once the flow
finished longer ago than --older-than, then the flow itself (its steps and
edges) when no job or dead letter of it is left (jobs/retention.py).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import CommandParser

from django_jobretry.conf import jobretry_settings
from django_jobretry.jobs.retention import prune_dead_letters, prune_flows, prune_succeeded
from django_jobretry.management.cli import DatabaseCommand, duration


class Command(DatabaseCommand):
    help = (
        "Delete succeeded jobs finished longer ago than --older-than, and workflows finished as long ago "
        "with nothing left of them; dead letters only when DEAD_LETTER_RETENTION_DAYS or "
        "--dead-letters-older-than says so."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=duration,
            default=None,
            help="e.g. 7d, 12h (default: JOBRETRY SUCCEEDED_RETENTION_DAYS days)",
        )
        parser.add_argument(
            "--dead-letters-older-than",
            type=duration,
            default=None,
            help="also prune dead letters dead this long (default: DEAD_LETTER_RETENTION_DAYS; unset: keep)",
        )
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")

    def handle(
        self,
        *args: Any,
        older_than: timedelta | None,
        dead_letters_older_than: timedelta | None,
        dry_run: bool,
        **options: Any,
    ) -> None:
        age = (
            older_than
            if older_than is not None
            else timedelta(days=jobretry_settings.succeeded_retention_days)
        )
        count = prune_succeeded(age, dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        self.stdout.write(f"{verb} {count} succeeded job(s) finished more than {age} ago")
        retention = jobretry_settings.dead_letter_retention_days
        dead_age = dead_letters_older_than
        if dead_age is None and retention is not None:
            dead_age = timedelta(days=retention)
        if dead_age is not None:
            counts = prune_dead_letters(dead_age, dry_run=dry_run)
            self.stdout.write(f"{verb} {sum(counts.values())} dead letter(s) dead more than {dead_age} ago")
            for (queue_name, reason), n in sorted(counts.items()):
                self.stdout.write(f"  {queue_name} / {reason}: {n}")
        flows = prune_flows(age, dry_run=dry_run)
        if flows:  # quiet where no workflow is used
            self.stdout.write(f"{verb} {flows} workflow(s) finished more than {age} ago, with their steps")
