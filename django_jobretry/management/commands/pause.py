"""`manage.py pause --queue Q | --task T [--reason ...] [--until ... | --for ...]`: hold work everywhere.

No worker on any host claims a job of the paused queue or task until
`manage.py resume` (or the pause's end); jobs already running finish. A
name neither declared nor on any job (services/hold_names.py) is refused
with exit 2 and the close names, before anything is stored: it is usually
a typo. ``--undeployed`` pauses it anyway, for a task or queue whose code
is not deployed yet (held from its first job).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from django_jobretry.deadletters.cli_bulk import default_actor
from django_jobretry.management.cli import DatabaseCommand
from django_jobretry.management.hold_arguments import add_pause_arguments
from django_jobretry.services import holds
from django_jobretry.services.console.status_holds import held_by_pause, holds_report

#: What the command says instead of the Python keyword the service's message names.
UNDEPLOYED = "Add --undeployed to pause it before it is deployed."


class Command(DatabaseCommand):
    help = "Pause a queue or a task on every worker: none of its jobs is claimed until it is resumed."

    def add_arguments(self, parser: CommandParser) -> None:
        add_pause_arguments(parser)

    def handle(self, *args: Any, queue: str | None, task: str | None, **options: Any) -> None:
        actor = options["actor"] or default_actor()
        until = options["until"] or options["for_"]
        try:
            created = holds.pause(
                queue=queue,
                task=task,
                actor=actor,
                reason=options["reason"],
                until=until,
                undeployed=options["undeployed"],
            )
        except holds.UnknownName as exc:
            raise CommandError(f"{exc.problem} {UNDEPLOYED}", returncode=2) from None
        except holds.InvalidHold as exc:
            raise CommandError(str(exc), returncode=2) from None
        target = holds.target(queue=queue, task=task)
        line = next(p for p in holds_report().pauses if (p.kind, p.name) == (target.kind, target.name))
        until_text = f" until {line.until.isoformat()}" if line.until else " until resumed"
        again = "" if created else " (it was paused already: who, why and until are updated)"
        self.stdout.write(f"{target} paused by {line.paused_by}{until_text}{again}")
        self.stdout.write(
            f"{held_by_pause(target.kind, target.name)} due job(s) of {target} held "
            "(ready and past their run time, as `jobstatus` counts them); jobs already running finish"
        )
