"""`manage.py deadletters repair` options: what --set, --args and --kwargs accept, the exit codes.

Each value is refused, before anything touches the database, when it cannot
be read or PostgreSQL's jsonb would not take it (models/storable.py): one
line, exit 2 (deadletter_arguments.read_options). Its run is
management/deadletter_repair.py.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from django_jobretry.conf import jobretry_settings
from django_jobretry.exceptions import InvalidJob
from django_jobretry.management.cli import duration, positive_int
from django_jobretry.models.storable import check_json

#: ``--set order.id=7``: the name's parts and the value.
Assignment = tuple[list[str], Any]


def _depth() -> int:
    return jobretry_settings.max_args_depth


def json_arguments(text: str) -> Any:
    """``--args``/``--kwargs``: JSON jsonb can take (which of array or object is checked with the rest)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise argparse.ArgumentTypeError(
            f"nested too deeply to be read: arguments may be nested {_depth()} levels deep (MAX_ARGS_DEPTH)"
        ) from None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    try:
        check_json("the value", value, max_depth=_depth())
    except InvalidJob as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def assignment(text: str) -> Assignment:
    """``--set NAME=VALUE``: the value read as JSON when it is (``0``, ``true``, ``"42"``), else as text.

    ``NAME='text'`` is the text inside the quotes; a dotted name
    (``order.id=7``) sets a key inside an object.
    """
    name, equals, raw = text.partition("=")
    path = name.split(".")
    if not equals or not all(part.strip() for part in path):
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not NAME=VALUE, e.g. email=a@example.com")
    value: Any = raw
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        value = raw[1:-1]
    else:
        try:
            value = json.loads(raw)
        except ValueError:
            pass  # text
        except RecursionError:
            raise argparse.ArgumentTypeError(
                f"the value of {name[:60]!r} is nested too deeply to be read: arguments may be nested "
                f"{_depth()} levels deep (MAX_ARGS_DEPTH)"
            ) from None
    nested = value
    for part in reversed(path):  # keys and depth as the argument will hold them
        nested = {part: nested}
    try:
        check_json(f"the value of {name[:60]!r}", nested, max_depth=_depth())
    except InvalidJob as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return path, value


REPAIR_EPILOG = """\
exit codes:
  0    repaired and requeued (--dry-run: the changes printed, nothing changed)
  1    not repaired: the dead letter is no longer one, or its arguments were
       changed by someone else since this command read them, or another job
       holds its unique_key; nothing changed
  2    usage error: nothing to change, JSON that cannot be read or stored,
       arguments the task cannot take (or an unregistered task), unchanged
       arguments, a PAYLOAD_REDACTOR configured, or not confirmed; nothing changed
  4    failed: invalid settings, database unreachable, unexpected error
"""


def add_repair_parser(actions: Any, formatter_class: type[argparse.HelpFormatter]) -> None:
    """The ``repair`` action (its run: management/deadletter_repair.py)."""
    parser = actions.add_parser(
        "repair",
        help="change a dead letter's arguments, then requeue it",
        formatter_class=formatter_class,
        epilog=REPAIR_EPILOG,
    )
    parser.description = (
        "Change a dead letter's arguments and requeue it, as the admin's Repair arguments does: the new "
        "arguments pass the checks of an enqueue, the changes are printed and confirmed (or --yes), and "
        "a change someone else made meanwhile is refused. The new job's requeue entry records who "
        "changed what. NAME is a parameter's: it also changes an argument passed by position."
    )
    parser.add_argument("id", type=positive_int, metavar="ID", help="the dead letter to repair")
    parser.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help='change one argument, VALUE read as JSON when it is (0, true, "42"), else as text; '
        "'text' in single quotes is text; order.id=7 changes a key inside; repeatable",
    )
    parser.add_argument("--args", dest="new_args", metavar="JSON", help="all positional arguments")
    parser.add_argument("--kwargs", dest="new_kwargs", metavar="JSON", help="all keyword arguments")
    parser.add_argument(
        "--run-after", type=duration, metavar="DURATION", help="the new job waits this long: 10m, 1h"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the changes; change nothing")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--actor", help="who repairs, recorded with the requeue (default: the OS user)")
