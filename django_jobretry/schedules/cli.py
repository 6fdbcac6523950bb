"""`manage.py schedules [--check] | pause NAME | resume NAME | run NAME`, and `jobstatus`' Schedules section.

Without an action it lists every schedule this deploy declares and every
schedule row (one left from an older deploy included), one per line, from
the same read model as the admin and `jobstatus` (schedules/status.py), so
the three never disagree. ``--check`` says what ``manage.py check`` says
about the declarations (ids django_jobretry.E04x), so a deploy script can
stop on a wrong one. The actions go through schedules/rows.py, which acts
on every worker at once, and record the OS user (or ``--actor``) as who
acted, as `deadletters` does. Django finds the command in
management/commands/schedules.py, which imports :class:`Command` from here.

A next slot is shown in the schedule's own time zone, where its cron is
read (an operator thinks "the 03:00 Berlin run"), and in UTC. Names, tasks
and pause reasons come from rows anyone with database access can write:
every cell is made printable (display.py ``table``).
Schedule arguments are never shown.

Exit codes: 0 done (also when the schedule was already paused or resumed);
1 ``--check`` found wrong declarations, or a run was refused (overlap) or
cannot be made here; 2 usage error, such as a name no schedule has; 4 the
database cannot be reached (management/cli.py).
"""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta
from typing import Any

from django.core.checks import CheckMessage, run_checks
from django.core.management.base import CommandError, CommandParser

from django_jobretry.deadletters.cli import HelpFormatter, accept_django_options
from django_jobretry.deadletters.cli_bulk import EXIT_PARTIAL, EXIT_USAGE, default_actor
from django_jobretry.display import humanize_delay, printable, table
from django_jobretry.exceptions import InvalidJob
from django_jobretry.management.cli import DatabaseCommand, cancel_actor
from django_jobretry.models import Schedule
from django_jobretry.models.instants import is_text
from django_jobretry.schedules import declared, rows, status
from django_jobretry.schedules.status import NOT_DECLARED, ScheduleState, utc, zoned

#: The ids of the schedule checks (schedules/checks.py): E040 to E043, and any added later.
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
    if len(text) > rows.PAUSE_REASON_CHARS:
        raise argparse.ArgumentTypeError(
            f"is {len(text)} characters long; at most {rows.PAUSE_REASON_CHARS} are kept"
        )
    return text


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
        """The list and ``--check`` on the command itself, one subparser per action."""
        parser.add_argument(
            "--check",
            action="store_true",
            help="report the wrong schedule declarations (what `manage.py check` says) and exit 1 if any",
        )
        actions = parser.add_subparsers(dest="action", metavar="{pause,resume,run}")
        pause = actions.add_parser(
            "pause", help="stop a schedule making runs, on every worker, until resumed"
        )
        resume = actions.add_parser("resume", help="let a paused schedule make runs again")
        run = actions.add_parser("run", help="make one run of a schedule now, outside its slots")
        pause.add_argument(
            "--reason",
            type=reason,
            default="",
            help=f"why, shown with the pause (at most {rows.PAUSE_REASON_CHARS} characters)",
        )
        for subparser in (pause, resume, run):
            subparser.add_argument(
                "name", metavar="NAME", help="the schedule's name (see `manage.py schedules`)"
            )
            subparser.add_argument(
                "--actor", type=cancel_actor, help="who acts, recorded with the action (default: the OS user)"
            )
        accept_django_options(actions)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options.get("action")
        if action is None:
            if options["check"]:
                self.check_declarations()
            else:
                _, states = status.listing()
                self.stdout.write("\n".join(listing_lines(states)))
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
        except rows.ScheduleNotFound as exc:
            raise CommandError(self.not_found(name, exc), returncode=EXIT_USAGE) from None
        except rows.RunRefused as exc:
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
        if rows.pause(name, actor=actor, reason=why):
            self.stdout.write(f"schedule {name} paused by {printable(actor)}: no run starts until resumed")
            return
        row = Schedule.objects.only("paused_at", "paused_by").get(name=name)
        since = utc(row.paused_at) if row.paused_at else "?"
        state = printable(f"since {since} by {row.paused_by or '?'}")
        self.stdout.write(f"schedule {name} was already paused ({state}): nothing changed")

    def resume(self, name: str, actor: str) -> None:
        if rows.resume(name, actor=actor):
            self.stdout.write(f"schedule {name} resumed by {printable(actor)}")
        else:
            self.stdout.write(f"schedule {name} was not paused: nothing changed")

    def run_now(self, name: str, actor: str) -> None:
        job_id = rows.run_now(name, actor=actor)
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


# -- how schedules read on a terminal and in JSON (`jobstatus` reads these through features.py) --


NOT_STARTED = "no worker has started it yet"


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else round(value.total_seconds(), 3)


def read() -> list[ScheduleState]:
    """`jobstatus`' read: every schedule row and declaration (features.py)."""
    return status.listing()[1]


def list_json(states: list[ScheduleState]) -> list[dict[str, Any]]:
    """`jobstatus --json`'s "schedules": a list, empty when there are none (a script need not test for it)."""
    return [as_json(state) for state in states]


def as_json(state: ScheduleState) -> dict[str, Any]:
    """One schedule as plain JSON values: times in ISO 8601 with their offset, ages in seconds."""
    last = state.last
    return {
        "name": state.name,
        "task": state.task,
        "cadence": state.cadence,
        "declared": state.declared,
        "declared_cadence": state.declared_cadence,
        "time_zone": state.zone,
        "started": state.has_row,
        "next_slot": _time(state.next_slot),
        "period_seconds": _seconds(state.period),
        "last_slot": _time(last.slot),
        "last_job_id": last.job_id,
        "last_outcome": last.outcome,
        "last_outcome_detail": last.detail,
        "last_dead_letter_id": last.dead_letter_id,
        "last_success_at": _time(state.last_success_at),
        "last_success_age_seconds": _seconds(state.last_success_age),
        "runs": state.runs,
        "skipped": state.skipped,
        "missed": state.missed,
        "refused": state.refused,
        "paused": state.paused_at is not None,
        "paused_at": _time(state.paused_at),
        "paused_by": state.paused_by,
        "pause_reason": state.pause_reason,
    }


def name_cell(state: ScheduleState) -> str:
    """The name, and why nothing runs it if nothing does."""
    if not state.declared:
        return f"{state.name} ({NOT_DECLARED})"
    return state.name if state.has_row else f"{state.name} ({NOT_STARTED})"


def cadence_cell(state: ScheduleState) -> str:
    """The cadence the workers follow; this deploy's too while a worker of it has not started."""
    if state.declared_cadence is None or state.declared_cadence == state.cadence:
        return state.cadence
    return f"{state.cadence} (this deploy: {state.declared_cadence})"


def next_cell(state: ScheduleState) -> str:
    """The next slot in the schedule's zone, and in UTC when that is another zone."""
    if state.next_slot is None:
        return "-"
    if state.zone is None or state.zone == "UTC":
        return utc(state.next_slot)
    return f"{zoned(state.next_slot, state.zone)} ({utc(state.next_slot)})"


def success_cell(state: ScheduleState) -> str:
    if state.last_success_at is None or state.last_success_age is None:
        return "never"
    return f"{utc(state.last_success_at)} ({humanize_delay(state.last_success_age)} ago)"


def last_cell(state: ScheduleState) -> str:
    """The last run's slot, job and outcome: "2026-12-02 03:00:00 UTC job 12: dead (exhausted)"."""
    last = state.last
    if last.job_id is None:
        return str(last)
    where = f"dead letter {last.dead_letter_id}" if last.dead_letter_id is not None else f"job {last.job_id}"
    slot = utc(last.slot) if last.slot is not None else "-"
    return f"{slot} {where}: {last}"


def paused_cell(state: ScheduleState) -> str:
    if state.paused_at is None:
        return "-"
    reason = f": {state.pause_reason}" if state.pause_reason else ""
    return f"since {utc(state.paused_at)} by {state.paused_by or '?'}{reason}"


def status_lines(states: list[ScheduleState]) -> list[str]:
    """`jobstatus`' Schedules section: each one's next slot, last success, counts and pause, or none."""
    if not states:
        return []
    paused = sum(1 for state in states if state.paused_at is not None)
    header = ("schedule", "next slot", "last success", "runs", "skipped", "missed", "paused")
    cells = [
        (
            name_cell(state),
            next_cell(state),
            success_cell(state),
            f"{state.runs:,}",
            f"{state.skipped:,}",
            f"{state.missed:,}",
            paused_cell(state),
        )
        for state in states
    ]
    return [f"Schedules: {len(states)}, {paused} paused", *table(header, cells, {3, 4, 5})]


def listing_lines(states: list[ScheduleState]) -> list[str]:
    """`manage.py schedules`: every declared schedule and every row, one per line."""
    if not states:
        return [
            'No schedules: none is declared (@job(schedule=...), JOBRETRY["SCHEDULES"]) and no row exists.'
        ]
    header = (
        *("schedule", "task", "cadence", "next slot", "last run"),
        *("last success", "runs", "skipped", "missed", "refused", "paused"),
    )
    cells = [
        (
            name_cell(state),
            state.task,
            cadence_cell(state),
            next_cell(state),
            last_cell(state),
            success_cell(state),
            f"{state.runs:,}",
            f"{state.skipped:,}",
            f"{state.missed:,}",
            f"{state.refused:,}",
            paused_cell(state),
        )
        for state in states
    ]
    return table(header, cells, {6, 7, 8, 9})
