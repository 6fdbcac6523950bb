"""`manage.py deadletters repair ID`: the admin's edit → review → confirm, on the command line.

The new arguments are the dead letter's own, with ``--args``/``--kwargs``
replacing them whole and each ``--set NAME=VALUE`` changing one. A name is
a parameter's: it changes the keyword argument of that name, or, when the
task's function takes it by position and the row holds it there, that
positional argument (a row stores positional arguments by index). They
pass the checks an enqueue makes (services/repairs.py ``validated``); the
diff is printed and confirmed (or ``--yes``); then services/repairs.py
replaces them and requeues under the row lock, comparing them with the
digest of what this command read: a change made meanwhile by someone else
is refused and nothing changes.

Values are shown as ``deadletters show`` shows arguments: the command line
has no permissions, but with a PAYLOAD_REDACTOR configured the arguments
are only ever shown redacted, so a repair, which prints and compares
values, is refused then (as the admin refuses it to everyone).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError

from django_jobretry.conf import jobretry_settings
from django_jobretry.display.terminal import printable
from django_jobretry.exceptions import InvalidJob, NotDead, RequeueConflict
from django_jobretry.management import deadletter_cli as cli
from django_jobretry.management.repair_lines import change_line
from django_jobretry.models import DeadLetter, DeadLetterSource
from django_jobretry.services import repairs
from django_jobretry.services.argument_search import parameter_positions


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
    actor = options["actor"] or cli.default_actor()
    try:
        repaired = repairs.repair(
            pk, args=new_args, kwargs=new_kwargs, seen=seen, actor=actor, run_after=options["run_after"]
        )
    except NotDead:
        _missed(f"dead letter {pk} was requeued or discarded by someone else meanwhile: nothing was changed")
    except repairs.RepairConflict:
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
        arguments = repairs.validated(dead.task_name, *assigned(dead, options))
    except InvalidJob as exc:
        _refuse(str(exc))
    found = repairs.changes(dead.args, dead.kwargs, *arguments)
    if not found:
        _refuse(f"the arguments of dead letter {pk} are unchanged: requeue it instead")
    return dead, repairs.digest(dead.args, dead.kwargs), arguments, found


def _refuse(message: str) -> NoReturn:
    raise CommandError(printable(message, one_line=True), returncode=cli.EXIT_USAGE)


def _missed(message: str) -> NoReturn:
    raise CommandError(message, returncode=cli.EXIT_PARTIAL)
