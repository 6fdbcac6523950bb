"""The options of `manage.py pause` and `resume`: which queue or task, why, until when, who.

argparse refuses a malformed value with the option's name and exit code 2,
before anything is stored; what only the hold service can judge (an
``until`` that has passed on the database clock, a name neither declared
nor on any job) it refuses the same way.
"""

from __future__ import annotations

import argparse
from datetime import datetime

from django.core.management.base import CommandParser
from django.utils import timezone

from django_jobretry.management.cli import cancel_actor, duration
from django_jobretry.models.holds import REASON_MAX_LENGTH


def moment(text: str) -> datetime:
    """An ISO 8601 date or time (2026-12-24, 2026-12-24T08:00+01:00); naive: the current time zone."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a date or time like 2026-12-24 or 2026-12-24T08:00+01:00"
        ) from None
    return timezone.make_aware(value) if timezone.is_naive(value) else value


def reason(text: str) -> str:
    if len(text) > REASON_MAX_LENGTH:
        raise argparse.ArgumentTypeError(
            f"is {len(text)} characters long; at most {REASON_MAX_LENGTH} are kept"
        )
    return text


def add_target(parser: CommandParser, *, circuit: bool = False) -> None:
    """``--queue`` or ``--task`` (or, for a resume, ``--circuit``): exactly one."""
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--queue", metavar="QUEUE", help="a queue: every task's jobs on it")
    target.add_argument("--task", metavar="TASK", help="a task, by its registered name")
    if circuit:
        target.add_argument(
            "--circuit", metavar="TASK", help="close the circuit breaker of this task now, releasing its jobs"
        )
    parser.add_argument(
        "--actor", type=cancel_actor, help="who acts, recorded with the pause (default: the OS user)"
    )


def add_pause_arguments(parser: CommandParser) -> None:
    add_target(parser)
    parser.add_argument(
        "--undeployed",
        action="store_true",
        help="pause it although no code declares it and no job has it: code not deployed yet "
        "(without this, such a name is refused as a likely typo)",
    )
    parser.add_argument("--reason", type=reason, default="", help="why, shown wherever the pause is")
    end = parser.add_mutually_exclusive_group()
    end.add_argument("--until", type=moment, help="the pause ends by itself at this date or time")
    end.add_argument(
        "--for",
        dest="for_",
        metavar="DURATION",
        type=duration,
        help="the pause ends by itself after 30m, 2h, 1d, ...",
    )
