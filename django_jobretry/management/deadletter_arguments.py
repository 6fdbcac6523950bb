"""`manage.py deadletters` options: one subparser per action, the exit codes, Django's options.

import-django-q2's options are here too; its run is management/import_django_q2.py.
The value validators are shared with the other commands (management/cli.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError, CommandParser, DjangoHelpFormatter
from django.db.models import Q

from django_jobretry.conf import jobretry_settings
from django_jobretry.display.terminal import printable
from django_jobretry.management.cli import (
    cursor,
    duration,
    fingerprint,
    group_count,
    page_size,
    positive_int,
    queue_name,
    rate,
    recent,
    since,
    text_value,
)
from django_jobretry.management.deadletter_cli import EXIT_USAGE
from django_jobretry.management.repair_arguments import add_repair_parser, assignment, json_arguments
from django_jobretry.models import DeadReason
from django_jobretry.services.argument_search import WHOLE_VALUES, InvalidSearch, containment

# --- manage.py deadletters ----------------------------------------------------------------------

#: The action whose run is management/import_django_q2.py.
IMPORT_ACTION = "import-django-q2"

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
    """``--arg``: the admin's search (services/argument_search.py), refused where `show` redacts.

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
    ("set", "--set", assignment),
    ("new_args", "--args", json_arguments),  # not dest "args": Django passes that as positional
    ("new_kwargs", "--kwargs", json_arguments),
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


def add_deadletters_arguments(parser: CommandParser) -> Any:
    """list | groups | show | requeue | discard | repair | import-django-q2, each with its own options.

    Returns the subparsers, for accept_django_options().
    """
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
        "--since", type=recent, metavar="WHEN", help="only dead letters dead within this long (24h) or since"
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
    add_repair_parser(actions, HelpFormatter)
    _import_django_q2(actions)
    return actions


# --- manage.py deadletters import-django-q2 -----------------------------------------------------

IMPORT_EPILOG = """\
exit codes:
  0    done: every selected failure was imported, or skipped because it was
       imported before, already is a dead letter, or is still in django-q2's
       queue (so running it again imports 0 and exits 0)
  1    partial: some failures cannot be read here (no function path, a
       function or hook not of the project's apps, pickles that are not
       plain data, arguments too deep to sign, or a row the database
       refuses) and were not imported, each named; the rest were
  2    usage error (a bad --since): nothing changed
  4    failed: django-q2 or the adapter not installed, database unreachable,
       unexpected error (details with --traceback)
  130  interrupted (Ctrl-C): batches finished before the interrupt stay imported
--dry-run writes nothing and exits with the code the real run would have.
"""


def _import_django_q2(actions: Any) -> None:
    """The ``import-django-q2`` action (its run: management/import_django_q2.py)."""
    parser = actions.add_parser(
        IMPORT_ACTION,
        help="turn django-q2's existing failures into dead letters",
        formatter_class=HelpFormatter,
        epilog=IMPORT_EPILOG,
    )
    parser.description = (
        "Turn django-q2 Failure rows into dead letters (source django_q2) that can be requeued to "
        "django-q2 or discarded like any other. Each failure is imported once, however often this "
        "runs; the Failure rows are kept. Failures whose task is still in django-q2's queue are skipped."
    )
    parser.add_argument(
        "--since",
        type=since,
        metavar="WHEN",
        help="only failures that stopped after this: a duration back from now (7d, 12h) or a date "
        "or time (2025-01-31, 2025-01-31T08:00+01:00; without an offset: the current time zone)",
    )
    parser.add_argument(
        "--func",
        metavar="PATH",
        help="only this function path, e.g. shop.tasks.send_receipt",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would be imported; write nothing")
    parser.add_argument("--progress", action="store_true", help="draw the progress bar even if not a TTY")
