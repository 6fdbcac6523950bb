"""`manage.py canceljobs ID [ID ...]`: cancel ready or running jobs.

A ready job becomes a dead letter with reason "cancelled" at once; a running
one is stopped by its worker at its next heartbeat. Either can be requeued.
Exit code 1 when some id was not a live job (finished, dead, or unknown).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from django_jobretry.deadletters.cli_bulk import default_actor
from django_jobretry.jobs.recovery import cancel_jobs
from django_jobretry.management.cli import DatabaseCommand, cancel_actor, positive_int
from django_jobretry.models.job import ACTOR_MAX_LENGTH


class Command(DatabaseCommand):
    help = "Cancel jobs: ready ones become 'cancelled' dead letters now; their workers stop running ones."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "ids", nargs="+", type=positive_int, metavar="ID", help="ids of the jobs to cancel"
        )
        parser.add_argument(
            "--actor",
            type=cancel_actor,
            help=f"who cancels, recorded with the cancel, at most {ACTOR_MAX_LENGTH} characters "
            "(default: the OS user)",
        )

    def handle(self, *args: Any, ids: list[int], actor: str | None, **options: Any) -> None:
        result = cancel_jobs(ids, actor=actor or default_actor())
        for job_id, dead_id in sorted(result.dead_letters.items()):
            self.stdout.write(f"cancelled job {job_id}: dead letter {dead_id}")
        for job_id in result.stopping:
            self.stdout.write(f"job {job_id} is running: its worker stops it at its next heartbeat")
        if result.not_live:
            listed = ", ".join(map(str, result.not_live))
            raise CommandError(f"not live jobs (finished, dead or never existed): {listed}", returncode=1)
