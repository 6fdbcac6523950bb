"""`manage.py schedules [--check] | pause NAME | resume NAME | run NAME`: schedules from the command line.

Without an action it lists every schedule this deploy declares and every
schedule row (one left from an older deploy included), one per line, from
the same read model as the admin and `jobstatus`. ``--check`` says what
``manage.py check`` says about the declarations (ids django_jobretry.E04x),
so a deploy script can stop on a wrong one. The actions go through
services/schedule_controls.py, which acts on every worker at once, and record
the OS user (or ``--actor``) as who acted, as `deadletters` does.

Exit codes: 0 done (also when the schedule was already paused or resumed);
1 ``--check`` found wrong declarations, or a run was refused (overlap) or
cannot be made here; 2 usage error, such as a name no schedule has; 4 the
database cannot be reached (management/cli.py).
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.checks import CheckMessage, run_checks
from django.core.management.base import CommandError, CommandParser

from django_jobretry.conf.schedules import declared
from django_jobretry.deadletters.cli import HelpFormatter, accept_django_options
from django_jobretry.deadletters.cli_bulk import EXIT_PARTIAL, EXIT_USAGE, default_actor
from django_jobretry.display.terminal import printable
from django_jobretry.exceptions import InvalidJob
from django_jobretry.management import schedule_lines
from django_jobretry.management.cli import DatabaseCommand, cancel_actor
from django_jobretry.models import Schedule
from django_jobretry.models.storable import is_text
from django_jobretry.services import schedule_controls
from django_jobretry.services.console import status_schedules

#: The ids of the schedule checks (conf/schedule_checks.py): E040 to E043, and any added later.
CHECK_PREFIX = "django_jobretry.E04"
EPILOG = """\
exit codes:
  0    done (also when the schedule was paused, or not paused, already)
  1    --check found wrong declarations; or a run now was refused by the
       schedule's overlap policy, or cannot be made in this deploy
  2    usage error: an unknown schedule name (with a did-you-mean), a bad option
  4    the database cannot be reached
"""


def reason(text: str) -> str:
    """``--reason``: kept whole, so at most the column's length (the service would cut it)."""
    if len(text) > schedule_controls.PAUSE_REASON_CHARS:
        raise argparse.ArgumentTypeError(
            f"is {len(text)} characters long; at most {schedule_controls.PAUSE_REASON_CHARS} are kept"
        )
    return text


def add_arguments(parser: CommandParser) -> Any:
    """The list and ``--check`` on the command itself, one subparser per action; returns the subparsers."""
    parser.add_argument(
        "--check",
        action="store_true",
        help="report the wrong schedule declarations (what `manage.py check` says) and exit 1 if any",
    )
    actions = parser.add_subparsers(dest="action", metavar="{pause,resume,run}")
    pause = actions.add_parser("pause", help="stop a schedule making runs, on every worker, until resumed")
    resume = actions.add_parser("resume", help="let a paused schedule make runs again")
    run = actions.add_parser("run", help="make one run of a schedule now, outside its slots")
    pause.add_argument(
        "--reason",
        type=reason,
        default="",
        help=f"why, shown with the pause (at most {schedule_controls.PAUSE_REASON_CHARS} characters)",
    )
    for subparser in (pause, resume, run):
        subparser.add_argument("name", metavar="NAME", help="the schedule's name (see `manage.py schedules`)")
        subparser.add_argument(
            "--actor", type=cancel_actor, help="who acts, recorded with the action (default: the OS user)"
        )
    return actions


class Command(DatabaseCommand):
    help = (
        "List the schedules (next slot in their time zone, last run, last success, counts, pause), "
        "check their declarations, or pause, resume or run one now."
    )
    # Not Django's checks before every run: a wrong declaration must not hide the list or stop a
    # pause in an incident. ``--check`` runs them, and reports the schedules' own.
    requires_system_checks = ()

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("epilog", EPILOG)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        accept_django_options(add_arguments(parser))

    def handle(self, *args: Any, **options: Any) -> None:
        action = options.get("action")
        if action is None:
            if options["check"]:
                self.check_declarations()
            else:
                _, states = status_schedules.listing()
                self.stdout.write("\n".join(schedule_lines.listing_lines(states)))
            return
        if options["check"]:
            raise CommandError(f"--check goes without an action, not with {action}", returncode=EXIT_USAGE)
        name, actor = options["name"], options["actor"] or default_actor()
        try:
            if action == "pause":
                self.pause(name, actor, options["reason"])
            elif action == "resume":
                self.resume(name, actor)
            else:
                self.run_now(name, actor)
        except schedule_controls.ScheduleNotFound as exc:
            raise CommandError(self.not_found(name, exc), returncode=EXIT_USAGE) from None
        except schedule_controls.RunRefused as exc:
            raise CommandError(f"not run: {printable(exc)}", returncode=EXIT_PARTIAL) from None
        except InvalidJob as exc:
            raise CommandError(
                f"schedule {name!r} cannot make a run in this deploy: {printable(exc)} "
                "(see `manage.py schedules --check`)",
                returncode=EXIT_PARTIAL,
            ) from None

    def check_declarations(self) -> None:
        """Print the schedule checks' errors, each naming its schedule; exit 1 if there is any."""
        problems: list[CheckMessage] = [
            message for message in run_checks() if (message.id or "").startswith(CHECK_PREFIX)
        ]
        for message in problems:
            hint = f"\n    HINT: {message.hint}" if message.hint else ""
            self.stdout.write(printable(f"{message.id}: {message.msg}{hint}"))
        if problems:
            count = len(problems)
            raise CommandError(
                f"{count} schedule declaration problem{'s' if count > 1 else ''} (above); "
                "the schedules they name do not run until fixed",
                returncode=EXIT_PARTIAL,
            )
        count = len(declared())
        self.stdout.write(f"{count} declared schedule{'s' if count != 1 else ''}: no problem found.")

    def pause(self, name: str, actor: str, why: str) -> None:
        if schedule_controls.pause(name, actor=actor, reason=why):
            self.stdout.write(f"schedule {name} paused by {printable(actor)}: no run starts until resumed")
            return
        row = Schedule.objects.only("paused_at", "paused_by").get(name=name)
        since = status_schedules.utc(row.paused_at) if row.paused_at else "?"
        state = printable(f"since {since} by {row.paused_by or '?'}")
        self.stdout.write(f"schedule {name} was already paused ({state}): nothing changed")

    def resume(self, name: str, actor: str) -> None:
        if schedule_controls.resume(name, actor=actor):
            self.stdout.write(f"schedule {name} resumed by {printable(actor)}")
        else:
            self.stdout.write(f"schedule {name} was not paused: nothing changed")

    def run_now(self, name: str, actor: str) -> None:
        job_id = schedule_controls.run_now(name, actor=actor)
        self.stdout.write(f"schedule {name}: run now by {printable(actor)} as job {job_id}")

    def not_found(self, name: str, exc: Exception) -> str:
        """The service's did-you-mean, and why a name the admin lists may still be refused here."""
        text = printable(exc)
        if not is_text(name):  # no row has it, and PostgreSQL could not be asked
            return f"{text} A schedule's name is UTF-8 text without NUL; this one is not."
        if Schedule.objects.filter(name=name).exists():
            text += (
                " Its row is left from a deploy that declared it: this one does not, so it cannot act on it."
            )
        return text
