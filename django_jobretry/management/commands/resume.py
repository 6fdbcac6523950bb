"""`manage.py resume --queue Q | --task T | --circuit TASK`: let held work run again, now.

A resume wakes idle workers of the released queues at once. ``--circuit``
closes a task's circuit breaker by hand, releasing every job it holds at
the breaker's release rate (those parked at its end and the one that raised
``CircuitOpen`` too), and says how many. Exit code 1 when there was nothing to resume.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from django_jobretry.deadletters.cli_bulk import default_actor
from django_jobretry.management.cli import DatabaseCommand
from django_jobretry.management.hold_arguments import add_target
from django_jobretry.services import circuits, holds


class Command(DatabaseCommand):
    help = "Resume a paused queue or task, or close a task's circuit breaker, on every worker."

    def add_arguments(self, parser: CommandParser) -> None:
        add_target(parser, circuit=True)

    def handle(
        self, *args: Any, queue: str | None, task: str | None, circuit: str | None, **options: Any
    ) -> None:
        actor = options["actor"] or default_actor()
        if circuit is not None:
            try:
                holds.target(task=circuit)  # a name no task can have is a usage error, not a query
            except holds.InvalidHold as exc:
                raise CommandError(str(exc), returncode=2) from None
            closed = circuits.close_by_hand(circuit, actor=actor)
            if closed is None:
                raise CommandError(f"the circuit of task {circuit!r} is not open", returncode=1)
            released = f"{closed.released} held job(s) released, {closed.rate:g} a second"
            self.stdout.write(f"circuit of task {circuit} closed by {actor}; {released}")
            return
        try:
            ended = holds.resume(queue=queue, task=task, actor=actor)
        except holds.InvalidHold as exc:
            raise CommandError(str(exc), returncode=2) from None
        target = holds.target(queue=queue, task=task)
        if ended is None:
            raise CommandError(f"{target} is not paused", returncode=1)
        since = ended.paused_at.isoformat()
        self.stdout.write(f"{target} resumed by {actor} (paused by {ended.paused_by} since {since})")
        self.stdout.write(f"{ended.held} ready job(s) released")
