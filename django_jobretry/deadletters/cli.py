"""`manage.py deadletters list|groups|show|requeue|discard|repair|import-django-q2`: the operator's tool.

Its Command lives here, with its options: one subparser per action
(management/commands/deadletters.py only names it, for Django to find).
Every change goes through the dead-letter service (guarded compare-and-swap):
a dead letter someone else handled meanwhile is reported, never silently
skipped (deadletters/cli_bulk.py). The exit codes are part of the interface:
see EPILOG. The value validators are shared with the other commands
(management/cli.py). What the other commands with actions borrow from
this one: HelpFormatter, accept_django_options (and cli_bulk's exit codes).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError, CommandParser, DjangoHelpFormatter, SystemCheckError
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Q

from django_jobretry.conf import jobretry_settings
from django_jobretry.deadletters import cli_import, cli_lines, cli_repair, service
from django_jobretry.deadletters.cli_bulk import EXIT_FAILED, EXIT_PARTIAL, EXIT_USAGE, BulkActions, _ids
from django_jobretry.deadletters.search import WHOLE_VALUES, InvalidSearch, containment
from django_jobretry.display import printable
from django_jobretry.management.cli import (
    DatabaseCommand,
    cursor,
    duration,
    fingerprint,
    group_count,
    page_size,
    positive_int,
    queue_name,
    rate,
    recent,
    text_value,
)
from django_jobretry.models import DeadLetter, DeadReason

EPILOG = """\
exit codes:
  0    done: every selected dead letter was acted on (list, show: printed;
       list also when nothing matches)
  1    partial: some named or selected dead letters were not acted on (or not
       shown) because they are no longer dead letters - already requeued or
       discarded by someone else, or never existed - or a requeue was refused
       because another job holds the same unique_key; the rest were acted on
  2    usage error, or a destructive bulk action was not confirmed (answered
       no, or stdin is not a terminal and --yes was not given): nothing changed
  3    nothing matched: requeue/discard --all selected no dead letter
  4    failed: invalid settings, database unreachable, unexpected error
       (details with --traceback)
  130  interrupted (Ctrl-C): batches finished before the interrupt stay done
--dry-run changes nothing and exits with the code the real run would have
(0, 1 or 3), without asking for confirmation.
`repair` lists its own (`deadletters repair --help`).

Django's common options (-v, --settings, --traceback, ...) go before or
after the action:
  manage.py deadletters requeue --all --queue emails -v 2 --traceback
"""


class HelpFormatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Django's ordering of options, with the epilog's line breaks kept."""


#: Django's options of every command (BaseCommand.create_parser): also accepted after the action.
_DJANGO_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("-v", "--verbosity"), {"type": int, "choices": [0, 1, 2, 3]}),
    (("--settings",), {}),
    (("--pythonpath",), {}),
    (("--traceback",), {"action": "store_true"}),
    (("--no-color",), {"action": "store_true"}),
    (("--force-color",), {"action": "store_true"}),
    (("--skip-checks",), {"action": "store_true"}),
)


def accept_django_options(actions: Any) -> None:
    """Let each action take Django's options too, so `deadletters list --settings x` works.

    manage.py reads --settings and --pythonpath wherever they are; argparse
    would still refuse them after a subcommand. Hidden from each action's
    help and left unset unless given, so the values before the action stay.
    """
    for subparser in actions.choices.values():
        for flags, options in _DJANGO_OPTIONS:
            subparser.add_argument(*flags, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **options)


def _filters(parser: CommandParser) -> None:
    group = parser.add_argument_group("filters (all must match)")
    group.add_argument("--queue", type=queue_name, help="queue name")
    group.add_argument("--task", help="task name, e.g. shop.tasks.send_receipt")
    group.add_argument("--reason", choices=DeadReason.values, help="why the job died")
    group.add_argument("--error-class", help="exact last error class, e.g. builtins.ConnectionResetError")
    group.add_argument(
        "--older-than", type=duration, metavar="DURATION", help="dead for longer than this: 7d, 12h, 15m, 90s"
    )
    group.add_argument(
        "--since",
        type=recent,
        metavar="WHEN",
        help="dead within this long (1h, 7d) or since this time (2025-01-31, 2025-01-31T08:00+01:00)",
    )
    group.add_argument(
        "--fingerprint", type=fingerprint, metavar="GROUP", help="one failure group, as `groups` prints it"
    )
    group.add_argument(
        "--arg",
        action="append",
        metavar="SEARCH",
        help="an argument equal to this, as the admin's search reads it (customer_id=42, order.id=7, 42, "
        f'{{"region": "eu"}}): {WHOLE_VALUES}; repeat to require several. Refused while a '
        "PAYLOAD_REDACTOR is configured",
    )


def argument_filter(text: str) -> Q:
    """``--arg``: the admin's search (deadletters/search.py), refused where `show` redacts.

    A filter answers "does any row match?", so it would read, one guess at a
    time, the values a PAYLOAD_REDACTOR hides from `show`.
    """
    if jobretry_settings.payload_redactor is not None:
        raise argparse.ArgumentTypeError(
            "not available while a PAYLOAD_REDACTOR is configured: a match would reveal what it hides"
        )
    try:
        return containment(text)
    except InvalidSearch as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: Options checked after parsing, as ``(dest, flag, read)``: a refusal is one line ("CommandError: --task
#: ..."), exit 2, as every other bad value of ours, where argparse would print its usage first.
_READ: tuple[tuple[str, str, Callable[[str], Any]], ...] = (
    ("task", "--task", text_value),
    ("error_class", "--error-class", text_value),
    ("func", "--func", text_value),
    ("actor", "--actor", text_value),
    ("arg", "--arg", argument_filter),
    ("set", "--set", cli_repair.assignment),
    ("new_args", "--args", cli_repair.json_arguments),  # not dest "args": Django passes that as positional
    ("new_kwargs", "--kwargs", cli_repair.json_arguments),
)


def read_options(options: dict[str, Any]) -> None:
    """Read (in place) the options that name stored text or hold JSON; CommandError, exit 2, if one cannot be.

    Text that is not UTF-8 (argv decoded with surrogateescape) or holds a
    NUL would fail in PostgreSQL, a traceback and exit 4, not a usage error.
    """
    for dest, flag, read in _READ:
        given = options.get(dest)
        if given is None:
            continue
        try:
            options[dest] = [read(text) for text in given] if isinstance(given, list) else read(given)
        except argparse.ArgumentTypeError as exc:
            raise CommandError(printable(f"{flag}: {exc}", one_line=True), returncode=EXIT_USAGE) from None


def _bulk(parser: CommandParser, verb: str) -> None:
    parser.add_argument("ids", nargs="*", type=positive_int, metavar="ID", help=f"dead letter ids to {verb}")
    parser.add_argument("--all", action="store_true", help=f"{verb} every dead letter matching the filters")
    _filters(parser)
    parser.add_argument("--dry-run", action="store_true", help="print what would happen; change nothing")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--progress", action="store_true", help="draw the progress bar even if not a TTY")
    parser.add_argument("--actor", help="who acts, recorded with the action (default: the OS user)")
    parser.add_argument(
        "--rate", type=rate, metavar="N/s", help=f"{verb} at most N/s or N/m (a recovering downstream)"
    )


class Command(BulkActions, DatabaseCommand):
    help = "List, inspect, requeue or discard dead letters: jobs that will not be retried again."
    stealth_options = ("stdin", "clock", "sleep")

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("epilog", EPILOG)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        """list | groups | show | requeue | discard | repair | import-django-q2, each with its own options."""
        actions = parser.add_subparsers(
            dest="action", required=True, metavar="{list,groups,show,requeue,discard,repair,import-django-q2}"
        )
        listing = actions.add_parser(
            "list", help="dead letters, newest first", formatter_class=HelpFormatter, epilog=EPILOG
        )
        listing.description = "Dead letters matching the filters, newest dead first, a page at a time."
        _filters(listing)
        listing.add_argument("--limit", type=page_size, default=50, help="page size, 1-1000 (default 50)")
        listing.add_argument("--after", type=cursor, metavar="CURSOR", help="the next page's cursor")
        listing.add_argument("--json", action="store_true", help="machine-readable output")
        groups = actions.add_parser(
            "groups", help="dead letters grouped by failure", formatter_class=HelpFormatter, epilog=EPILOG
        )
        groups.description = (
            "Failure groups, largest first: dead letters of the same task, error class and message once "
            "numbers, ids, quoted strings and hex are set aside (or of the fingerprint the task chose). "
            "Act on one with `requeue --all --fingerprint GROUP`."
        )
        groups.add_argument(
            "--since",
            type=recent,
            metavar="WHEN",
            help="only dead letters dead within this long (24h) or since",
        )
        groups.add_argument("--limit", type=group_count, default=20, help="groups shown, 1-500 (default 20)")
        groups.add_argument("--json", action="store_true", help="machine-readable output")
        show = actions.add_parser(
            "show", help="everything about dead letters", formatter_class=HelpFormatter, epilog=EPILOG
        )
        show.description = "Every field, the arguments (through PAYLOAD_REDACTOR), errors and requeues."
        show.add_argument("ids", nargs="+", type=positive_int, metavar="ID")
        show.add_argument("--json", action="store_true", help="machine-readable output")
        requeue = actions.add_parser(
            "requeue",
            help="turn dead letters back into ready jobs",
            formatter_class=HelpFormatter,
            epilog=EPILOG,
        )
        requeue.description = (
            "Turn dead letters back into ready jobs; each new job records who requeued it and when. "
            "--all asks for confirmation unless --yes."
        )
        _bulk(requeue, "requeue")
        requeue.add_argument(
            "--run-after", type=duration, metavar="DURATION", help="the new jobs wait this long: 10m, 1h"
        )
        discard = actions.add_parser(
            "discard",
            help="delete dead letters for good",
            formatter_class=HelpFormatter,
            epilog=EPILOG,
        )
        discard.description = (
            "Delete dead letters for good. More than one id, or --all, asks for confirmation unless --yes."
        )
        _bulk(discard, "discard")
        cli_repair.add_parser(actions, HelpFormatter)
        cli_import.add_parser(actions, HelpFormatter)
        accept_django_options(actions)

    def execute(self, *args: Any, **options: Any) -> str | None:
        try:
            return super().execute(*args, **options)
        except SystemCheckError as exc:  # 1 would read as "partial"
            exc.returncode = EXIT_FAILED
            raise
        except CommandError:
            raise
        except Exception as exc:
            raise CommandError(f"failed: {exc!r} (rerun with --traceback)", returncode=EXIT_FAILED) from exc

    def handle(self, *args: Any, **options: Any) -> None:
        read_options(options)
        self.options = options
        action = options["action"]
        if action == "list":
            self.list_page()
        elif action == "groups":
            cli_lines.groups(self, options)
        elif action == "show":
            self.show_ids(options["ids"])
        elif action == "repair":
            cli_repair.run(self, options, confirm=self.confirm)
        elif action == cli_import.ACTION:
            cli_import.run(self, options)
        else:
            self.act(action)

    def list_page(self) -> None:
        page = service.page_of(self.selection(), limit=self.options["limit"], after=self.options["after"])
        cursor = cli_lines.format_cursor(page.next_cursor) if page.next_cursor else None
        if self.options["json"]:
            out = {"items": [cli_lines.summary(dead) for dead in page.items], "next_cursor": cursor}
            self.stdout.write(json.dumps(out, cls=DjangoJSONEncoder, indent=2))
            return
        if not page.items:
            self.stdout.write("No dead letters match.")
            near = cli_lines.hint(task=self.options["task"], queue=self.options["queue"])
            if near and self.options["after"] is None:
                self.stdout.write(near)
        else:
            for line in cli_lines.table(
                cli_lines.LIST_HEADERS, [cli_lines.list_row(d) for d in page.items], cli_lines.LIST_CAPS
            ):
                self.stdout.write(line)
        if cursor:
            self.stdout.write(f"More dead letters: repeat with the same filters and --after {cursor}")

    def show_ids(self, ids: list[int]) -> None:
        found = DeadLetter.objects.in_bulk(ids)
        missing = [pk for pk in dict.fromkeys(ids) if pk not in found]
        shown = [found[pk] for pk in dict.fromkeys(ids) if pk in found]
        if self.options["json"]:
            out = {"dead_letters": [cli_lines.detail(dead) for dead in shown], "missing": missing}
            self.stdout.write(json.dumps(out, cls=DjangoJSONEncoder, indent=2))
        else:
            for index, dead in enumerate(shown):
                if index:
                    self.stdout.write("")
                for line in cli_lines.show_lines(dead):
                    self.stdout.write(line)
        if missing:
            raise CommandError(
                f"not dead letters (already requeued or discarded, or never existed): {_ids(missing)}",
                returncode=EXIT_PARTIAL,
            )
