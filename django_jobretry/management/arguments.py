"""argparse ``type=`` validators shared by the management commands.

One place, so every command rejects a bad value with the same clear message
naming what is allowed, before anything touches the database.
"""

from __future__ import annotations

import argparse
import re
from datetime import timedelta

from django_jobretry.validation import InvalidJob, check_queue_name

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
