"""What every management command accepts: argparse ``type=`` validators and each command's options.

One place, so every command rejects a bad value with the same clear message
naming what is allowed, before anything touches the database, and the
options of all commands read side by side.
"""

from __future__ import annotations

import argparse
import re
from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import CommandParser, DjangoHelpFormatter
from django.utils import timezone

from django_jobretry.exceptions import InvalidJob
from django_jobretry.models import DeadReason
from django_jobretry.validation import check_queue_name

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def positive_int(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def page_size(text: str) -> int:
    value = _integer(text)
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and 1000")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"{value} is not between 0 and 86400 seconds")
    return value


def queue_name(text: str) -> str:
    try:
        return check_queue_name(text)
    except InvalidJob as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def duration(text: str) -> timedelta:
    match = _DURATION.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30d, 12h, 15m or 90s")
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


_RATE = re.compile(r"^(\d+(?:\.\d+)?)\s*/\s*([sm])$")


def rate(text: str) -> float:
    """'10/s' or '30/m' -> items per second."""
    match = _RATE.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate like 10/s or 30/m")
    per_second = float(match.group(1)) / (60 if match.group(2) == "m" else 1)
    if per_second <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive rate")
    return per_second


def cursor(text: str) -> tuple[datetime, int]:
    """A cursor printed by `deadletters list`: '<dead_at ISO 8601>,<id>'."""
    stamp, _, pk = text.strip().rpartition(",")
    try:
        dead_at, last_id = datetime.fromisoformat(stamp), int(pk)
    except ValueError:
        dead_at, last_id = None, 0
    if dead_at is None or timezone.is_naive(dead_at) or last_id < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a cursor printed by `deadletters list`")
    return dead_at, last_id


# --- manage.py runworker -----------------------------------------------------------------------


def add_runworker_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--queue",
        action="append",
        type=queue_name,
        dest="queues",
        help="only run jobs of this queue; repeat for several (default: all queues)",
    )
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=10,
        help="jobs run at once, each in its own thread (default: %(default)s)",
    )
    parser.add_argument("--burst", action="store_true", help="exit 0 once no job is due")
    parser.add_argument("--max-jobs", type=positive_int, help="exit after running this many jobs")
    parser.add_argument("--lease", type=seconds, help="lease in seconds (default: JOBRETRY LEASE_SECONDS)")
    parser.add_argument(
        "--shutdown-timeout",
        type=seconds,
        help="grace period for running jobs on SIGTERM (default: JOBRETRY SHUTDOWN_TIMEOUT_SECONDS)",
    )
    parser.add_argument("--no-listen", action="store_true", help="poll only, without LISTEN/NOTIFY")
    parser.add_argument(
        "--pool",
        choices=("thread", "process"),
        default="thread",
        help="run handlers in threads, or each runner's jobs in a child process whose time limit "
        "is enforced by killing it (default: %(default)s)",
    )
    parser.add_argument(
        "--max-jobs-per-child",
        type=positive_int,
        metavar="N",
        help="with --pool process: replace a child process after N jobs (default: never)",
    )
    parser.add_argument(
        "--max-memory-mb",
        type=positive_int,
        metavar="MB",
        help="with --pool process: replace a child whose peak memory passed MB (default: never)",
    )


# --- manage.py canceljobs -----------------------------------------------------------------------


def add_canceljobs_arguments(parser: CommandParser) -> None:
    parser.add_argument("ids", nargs="+", type=positive_int, metavar="ID", help="ids of the jobs to cancel")
    parser.add_argument("--actor", help="who cancels, recorded with the cancel (default: the OS user)")


# --- manage.py prunejobs -----------------------------------------------------------------------


def add_prunejobs_arguments(parser: CommandParser) -> None:
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


# --- manage.py showpolicies --------------------------------------------------------------------


def add_showpolicies_arguments(parser: CommandParser) -> None:
    parser.add_argument("names", nargs="*", metavar="POLICY", help="policies to show (default: all)")


# --- manage.py deadletters ----------------------------------------------------------------------

EPILOG = """\
exit codes:
  0    done: every selected dead letter was acted on (list, show: printed;
       list also when nothing matches)
  1    partial: some named or selected dead letters were not acted on (or not
       shown) because they are no longer dead letters - already requeued or
       discarded by someone else, or never existed - or a requeue was refused
       because a live job holds the same unique_key; the rest were acted on
  2    usage error, or a destructive bulk action was not confirmed (answered
       no, or stdin is not a terminal and --yes was not given): nothing changed
  3    nothing matched: requeue/discard --all selected no dead letter
  4    failed: invalid settings, database unreachable, unexpected error
       (details with --traceback)
  130  interrupted (Ctrl-C): batches finished before the interrupt stay done
--dry-run changes nothing and exits with the code the real run would have
(0, 1 or 3), without asking for confirmation.

Django's common options go before the action:
  manage.py deadletters -v 2 --traceback requeue --all --queue emails
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


def _bulk(parser: CommandParser, verb: str) -> None:
    parser.add_argument("ids", nargs="*", type=positive_int, metavar="ID", help=f"dead letter ids to {verb}")
    parser.add_argument("--all", action="store_true", help=f"{verb} every dead letter matching the filters")
    _filters(parser)
    parser.add_argument("--dry-run", action="store_true", help="print what would happen; change nothing")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--progress", action="store_true", help="draw the progress bar even if not a TTY")
    parser.add_argument("--actor", help="who acts, recorded with the action (default: the OS user)")


def add_deadletters_arguments(parser: CommandParser) -> Any:
    """list | show | requeue | discard, each with its own options; returns the subparsers for more.

    `import-django-q2` is added by management/import_django_q2.py.
    """
    actions = parser.add_subparsers(
        dest="action", required=True, metavar="{list,show,requeue,discard,import-django-q2}"
    )
    listing = actions.add_parser(
        "list", help="dead letters, newest first", formatter_class=HelpFormatter, epilog=EPILOG
    )
    listing.description = "Dead letters matching the filters, newest dead first, a page at a time."
    _filters(listing)
    listing.add_argument("--limit", type=page_size, default=50, help="page size, 1-1000 (default 50)")
    listing.add_argument("--after", type=cursor, metavar="CURSOR", help="the next page's cursor")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
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
        "--rate", type=rate, metavar="N/s", help="at most N/s or N/m, for a recovering downstream"
    )
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
    return actions
