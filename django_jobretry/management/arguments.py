"""What every management command accepts: argparse ``type=`` validators and each command's options.

One place, so every command rejects a bad value with the same clear message
naming what is allowed, before anything touches the database, and the
options of all commands read side by side.
"""

from __future__ import annotations

import argparse
import re
from datetime import datetime, timedelta

from django.core.management.base import CommandParser
from django.utils import timezone

from django_jobretry.exceptions import InvalidJob
from django_jobretry.models.fingerprints import check_fingerprint
from django_jobretry.models.job import ACTOR_MAX_LENGTH
from django_jobretry.models.storable import is_text
from django_jobretry.services.failure_groups import MAX_GROUPS
from django_jobretry.validation import check_queue_name
from django_jobretry.worker.lifecycle import (
    CONCURRENCY_RANGE,
    DEFAULT_CONCURRENCY,
    MAX_CONCURRENCY,
    valid_concurrency,
)

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}
#: The longest duration any option takes: a century, like the retention settings. Every command
#: adds it to or takes it from now (a cutoff, --since, --run-after), and within a century of
#: now that is a time Python, Django and PostgreSQL all hold; 99999999d would not be.
MAX_DURATION_DAYS = 36_500


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


def concurrency(text: str) -> int:
    """``--concurrency``: bounded by the rule of WorkerOptions, refused here as a usage error."""
    value = _integer(text)
    if not valid_concurrency(value):
        raise argparse.ArgumentTypeError(f"{value} is invalid: {CONCURRENCY_RANGE}")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"{value} is not between 0 and 86400 seconds")
    return value


def lease_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds from 1 to 86400") from None
    if not 1 <= value <= 86_400:  # NaN fails too
        raise argparse.ArgumentTypeError(f"{value:g} is invalid: a lease is 1 to 86400 seconds")
    return value


def queue_name(text: str) -> str:
    try:
        return check_queue_name(text)
    except InvalidJob as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def text_value(text: str) -> str:
    """A name compared with stored text (--task, --error-class): one PostgreSQL takes, as argv may not be."""
    if not is_text(text):  # argv that is not UTF-8 holds lone surrogates; a NUL may come from a script
        raise argparse.ArgumentTypeError(f"{text!r} is not text PostgreSQL can take: not UTF-8, or a NUL")
    return text


def duration(text: str) -> timedelta:
    """The one parser of every duration option; argparse names the option in its error."""
    match = _DURATION.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30d, 12h, 15m or 90s")
    number, unit = float(match.group(1)), match.group(2)
    # Checked on the number: a longer one would not even make a timedelta (OverflowError).
    if number * _UNIT_SECONDS[unit] > MAX_DURATION_DAYS * _UNIT_SECONDS["d"]:
        raise argparse.ArgumentTypeError(
            f"{text!r} is out of range: a duration is from 0s to {MAX_DURATION_DAYS}d (100 years)"
        )
    return timedelta(**{_UNITS[unit]: number})


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


def since(text: str) -> datetime:
    """A duration back from now (30d, 12h) or a date or time (2025-01-31, 2025-01-31T08:00+01:00)."""
    if _DURATION.match(text.strip()):  # a duration out of range says so, not "neither ... nor"
        return timezone.now() - duration(text)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a duration like 30d, 12h, 15m or 90s nor a date or time like "
            "2025-01-31 or 2025-01-31T08:00+01:00"
        ) from None
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


def fingerprint(text: str) -> str:
    """``--fingerprint``: a failure group, 16 hex digits."""
    try:
        return check_fingerprint(text.strip().lower())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("fingerprint ")) from None


def group_count(text: str) -> int:
    """``groups --limit``: 1 to 500."""
    value = _integer(text)
    if not 1 <= value <= MAX_GROUPS:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and {MAX_GROUPS}")
    return value


def recent(text: str) -> timedelta | datetime:
    """``--since`` of `deadletters`: a duration (kept as one: measured on the database clock) or a time."""
    return duration(text) if _DURATION.match(text.strip()) else since(text)


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
        type=concurrency,
        default=DEFAULT_CONCURRENCY,
        help=f"jobs run at once, each in its own thread, 1-{MAX_CONCURRENCY} (default: %(default)s)",
    )
    parser.add_argument("--burst", action="store_true", help="exit 0 once no job is due")
    parser.add_argument("--max-jobs", type=positive_int, help="exit after running this many jobs")
    parser.add_argument(
        "--lease", type=lease_seconds, help="lease in seconds, 1-86400 (default: JOBRETRY LEASE_SECONDS)"
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=seconds,
        help="grace period for running jobs on SIGTERM (default: JOBRETRY SHUTDOWN_TIMEOUT_SECONDS)",
    )
    parser.add_argument(
        "--no-listen",
        action="store_true",
        help="poll only, without LISTEN/NOTIFY (default: JOBRETRY LISTEN, which is True)",
    )
    parser.add_argument(
        "--no-schedules",
        action="store_true",
        help="never insert the runs of periodic schedules (other workers do); --burst never does",
    )
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


def cancel_actor(text: str) -> str:
    """Who cancels: a name the cancel can record whole (services/cancel.py would cut it)."""
    if len(text) > ACTOR_MAX_LENGTH:
        raise argparse.ArgumentTypeError(
            f"is {len(text)} characters long; at most {ACTOR_MAX_LENGTH} characters are recorded"
        )
    return text


def add_canceljobs_arguments(parser: CommandParser) -> None:
    parser.add_argument("ids", nargs="+", type=positive_int, metavar="ID", help="ids of the jobs to cancel")
    parser.add_argument(
        "--actor",
        type=cancel_actor,
        help=f"who cancels, recorded with the cancel, at most {ACTOR_MAX_LENGTH} characters "
        "(default: the OS user)",
    )


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


def add_jobstatus_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        dest="as_json",
        help="print one JSON object (for scripts and monitoring) instead of text",
    )
