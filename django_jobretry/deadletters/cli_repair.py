"""`manage.py deadletters repair ID`: the admin's edit → review → confirm, on the command line.

The new arguments are the dead letter's own, with ``--args``/``--kwargs``
replacing them whole and each ``--set NAME=VALUE`` changing one. A name is
a parameter's: it changes the keyword argument of that name, or, when the
task's function takes it by position and the row holds it there, that
positional argument (a row stores positional arguments by index). They
pass the checks an enqueue makes (deadletters/repair.py ``validated``); the
diff is printed and confirmed (or ``--yes``); then deadletters/repair.py
replaces them and requeues under the row lock, comparing them with the
digest of what this command read: a change made meanwhile by someone else
is refused and nothing changes.

Values are shown as ``deadletters show`` shows arguments: the command line
has no permissions, but with a PAYLOAD_REDACTOR configured the arguments
are only ever shown redacted, so a repair, which prints and compares
values, is refused then (as the admin refuses it to everyone).

Each option's value is refused, before anything touches the database, when
it cannot be read or PostgreSQL's jsonb would not take it
(models/instants.py): one line, exit 2 (deadletters/cli.py ``read_options``).
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Callable
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError

from django_jobretry.conf import jobretry_settings
from django_jobretry.deadletters import repair
from django_jobretry.deadletters.cli_bulk import EXIT_PARTIAL, EXIT_USAGE, default_actor
from django_jobretry.deadletters.cli_lines import change_line
from django_jobretry.deadletters.search import parameter_positions
from django_jobretry.display import printable
from django_jobretry.exceptions import InvalidJob, NotDead, RequeueConflict
from django_jobretry.management.cli import duration, positive_int
from django_jobretry.models import DeadLetter, DeadLetterSource
from django_jobretry.models.instants import check_json

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


def add_parser(actions: Any, formatter_class: type[argparse.HelpFormatter]) -> None:
    """The ``repair`` action (its run: ``run`` below)."""
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


def assigned(dead: DeadLetter, options: dict[str, Any]) -> tuple[Any, Any]:
    """The dead letter's arguments with --args/--kwargs and each --set applied; InvalidJob for a bad path."""
    args = copy.deepcopy(dead.args if options["new_args"] is None else options["new_args"])
    kwargs = copy.deepcopy(dead.kwargs if options["new_kwargs"] is None else options["new_kwargs"])
    for path, value in options["set"] or ():
        name = path[0]
        index = next((i for i, tasks in parameter_positions(name).items() if dead.task_name in tasks), None)
        by_position = isinstance(args, list) and index is not None and index < len(args)
        if by_position and not (isinstance(kwargs, dict) and name in kwargs):
            holder, key = args, index
        elif isinstance(kwargs, dict):
            holder, key = kwargs, name
        else:
            raise InvalidJob(f"--set {name}: kwargs is not a JSON object")
        for depth, part in enumerate(path[1:], 1):
            if isinstance(holder, dict) and key not in holder:
                holder[key] = {}
            if not isinstance(holder[key], dict):
                where = ".".join(path[:depth])
                raise InvalidJob(
                    f"--set {'.'.join(path)}: {where} is not a JSON object, so it has no {part!r}"
                )
            holder, key = holder[key], part
        holder[key] = value
    return args, kwargs


def run(command: BaseCommand, options: dict[str, Any], *, confirm: Callable[[str, int], None]) -> None:
    """Refuse (exit 2), print the diff, ``confirm`` (the command's prompt), repair; exit 1 if beaten to it."""
    pk: int = options["id"]
    dead, seen, (new_args, new_kwargs), found = _prepared(pk, options)
    command.stdout.write(printable(f"Repair dead letter {pk} ({dead.task_name}):", one_line=True))
    for change in found:
        command.stdout.write(f"  {change_line(change)}")
    if options["dry_run"]:
        command.stdout.write("dry run: nothing was changed")
        return
    if not options["yes"]:
        confirm("repair", 1)
    actor = options["actor"] or default_actor()
    try:
        repaired = repair.repair(
            pk, args=new_args, kwargs=new_kwargs, seen=seen, actor=actor, run_after=options["run_after"]
        )
    except NotDead:
        _missed(f"dead letter {pk} was requeued or discarded by someone else meanwhile: nothing was changed")
    except repair.RepairConflict:
        _missed(f"dead letter {pk}'s arguments were changed by someone else meanwhile: nothing was changed")
    except RequeueConflict as exc:
        _missed(f"dead letter {pk} was not repaired: {exc.why}; nothing was changed")
    except InvalidJob as exc:
        _refuse(str(exc))
    count = len(repaired.changes)
    command.stdout.write(
        f"repaired dead letter {pk} ({count} change{'' if count == 1 else 's'}) "
        f"and requeued it as job {repaired.job.pk}"
    )


def _prepared(
    pk: int, options: dict[str, Any]
) -> tuple[DeadLetter, str, tuple[list[Any], dict[str, Any]], list[dict[str, Any]]]:
    """The dead letter, the digest of what was read, the new arguments and the changes; or exit 1 or 2."""
    if jobretry_settings.payload_redactor is not None:
        _refuse(
            "repair prints and compares argument values, which PAYLOAD_REDACTOR hides: it is not "
            "available while one is configured (nor in the admin)"
        )
    if not options["set"] and options["new_args"] is None and options["new_kwargs"] is None:
        _refuse("say what to change: --set NAME=VALUE (repeatable), --args JSON or --kwargs JSON")
    dead = DeadLetter.objects.filter(pk=pk).first()
    if dead is None:
        _missed(f"not a dead letter (already requeued or discarded, or never existed): {pk}")
    if dead.source != DeadLetterSource.JOBRETRY:
        _refuse(f"dead letter {pk} came from {dead.source}: it goes back there as it was signed, unrepaired")
    try:
        arguments = repair.validated(dead.task_name, *assigned(dead, options))
    except InvalidJob as exc:
        _refuse(str(exc))
    found = repair.changes(dead.args, dead.kwargs, *arguments)
    if not found:
        _refuse(f"the arguments of dead letter {pk} are unchanged: requeue it instead")
    return dead, repair.digest(dead.args, dead.kwargs), arguments, found


def _refuse(message: str) -> NoReturn:
    raise CommandError(printable(message, one_line=True), returncode=EXIT_USAGE)


def _missed(message: str) -> NoReturn:
    raise CommandError(message, returncode=EXIT_PARTIAL)
