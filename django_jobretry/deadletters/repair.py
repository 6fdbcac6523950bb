"""Repair before requeue: new arguments for a dead letter, validated as enqueue validates them.

A dead letter that died of a bad argument (a typo'd e-mail address, an id
that was since merged) cannot succeed as it is. The operator gives new
``args``/``kwargs``; they pass exactly the checks an enqueue makes (JSON
only, the size and depth limits, a call the task's function can take),
then, in one transaction: the dead letter is locked and compared with what
the operator was shown (``seen``, a digest of its arguments), its arguments
are replaced, it is requeued by the ordinary path (provenance, unique-key
guard, counters, signals), and the new job's requeue entry records the
repair: who, and a diff of the arguments (``RequeueEntry["repair"]``).

The diff holds argument values, so it is as private as the arguments: the
admin shows it only to users who may read arguments unredacted, and the
log line counts changes without naming a value.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection, transaction

from django_jobretry.conf import jobretry_settings
from django_jobretry.deadletters.service import requeue_many
from django_jobretry.exceptions import InvalidJob, NotDead
from django_jobretry.jobs import statements
from django_jobretry.jobs.enqueue import checked_arguments
from django_jobretry.jobs.history import recorded_actor
from django_jobretry.models import DeadLetter, DeadLetterSource, Job
from django_jobretry.registry import registry

logger = logging.getLogger("django_jobretry")

__all__ = ["RepairConflict", "Repaired", "changes", "digest", "repair", "validated"]


class RepairConflict(InvalidJob):
    """The dead letter's arguments are no longer those the operator edited: nothing was changed."""


@dataclass(frozen=True)
class Repaired:
    """The requeued job and the changes recorded on its requeue entry."""

    job: Job
    changes: list[dict[str, Any]]


def digest(args: Any, kwargs: Any) -> str:
    """What the operator saw: a digest of the arguments, carried by the form and compared under the lock."""
    text = json.dumps([args, kwargs], sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def validated(task_name: str, args: Any, kwargs: Any) -> tuple[list[Any], dict[str, Any]]:
    """The arguments as an enqueue of ``task_name`` would store them, or InvalidJob saying why not."""
    if not isinstance(args, list):
        raise InvalidJob(f"args must be a JSON array, not {type(args).__name__}")
    if not isinstance(kwargs, dict):
        raise InvalidJob(f"kwargs must be a JSON object, not {type(kwargs).__name__}")
    definition = registry.get(task_name)
    if definition is None:
        raise InvalidJob(
            f"task {task_name!r} is not registered in this process: its arguments cannot be checked, "
            "so they cannot be repaired here"
        )
    arguments = checked_arguments(definition, tuple(args), kwargs)
    return arguments.args, arguments.kwargs


def changes(
    old_args: Any, old_kwargs: Any, new_args: list[Any], new_kwargs: dict[str, Any]
) -> list[dict[str, Any]]:
    """Per positional index and keyword, what was changed, added or removed, with the values."""
    found: list[dict[str, Any]] = []
    old_list = old_args if isinstance(old_args, list) else []
    old_map = old_kwargs if isinstance(old_kwargs, dict) else {}
    for index in range(max(len(old_list), len(new_args))):
        _compare(found, f"args[{index}]", old_list[index : index + 1], new_args[index : index + 1])
    for name in [*old_map, *(key for key in new_kwargs if key not in old_map)]:
        _compare(
            found,
            f"kwargs[{name!r}]",
            [old_map[name]] if name in old_map else [],
            [new_kwargs[name]] if name in new_kwargs else [],
        )
    return found


def _compare(found: list[dict[str, Any]], path: str, old: list[Any], new: list[Any]) -> None:
    if old == new:
        return
    change: dict[str, Any] = {
        "path": path,
        "change": "changed" if old and new else ("added" if new else "removed"),
    }
    if old:
        change["old"] = old[0]
    if new:
        change["new"] = new[0]
    found.append(change)


def repair(
    dead_letter_id: int,
    *,
    args: Any,
    kwargs: Any,
    seen: str,
    actor: str,
    run_after: timedelta | None = None,
) -> Repaired:
    """Replace the dead letter's arguments and requeue it; the job's requeue entry records the diff.

    Raises InvalidJob (the arguments would not pass enqueue, or nothing
    changed), RepairConflict (``seen`` is not the digest of its current
    arguments), NotDead (someone requeued or discarded it), or what
    requeue() raises (RequeueConflict). Nothing is changed when it raises.
    """
    actor = recorded_actor(actor)
    with transaction.atomic():
        dead = DeadLetter.objects.select_for_update().filter(pk=dead_letter_id).first()
        if dead is None:
            raise NotDead(dead_letter_id)
        if dead.source != DeadLetterSource.JOBRETRY:
            raise InvalidJob(
                f"dead letter {dead_letter_id} came from {dead.source}: it goes back there as it was "
                "signed, so its arguments cannot be repaired here"
            )
        if digest(dead.args, dead.kwargs) != seen:
            raise RepairConflict(
                f"dead letter {dead_letter_id}'s arguments changed since they were shown: nothing was "
                "changed; open it again"
            )
        new_args, new_kwargs = validated(dead.task_name, args, kwargs)
        found = changes(dead.args, dead.kwargs, new_args, new_kwargs)
        if not found:
            raise InvalidJob(
                f"the arguments of dead letter {dead_letter_id} are unchanged: requeue it instead"
            )
        statements.replace_arguments(dead.pk, new_args, new_kwargs)
        result = requeue_many([dead.pk], run_after=run_after, actor=actor)
        if result.refusals:
            raise result.refusals[0]
        job_id = int(result.made[0].job_id)  # locked above and not refused: requeued
        record = {"by": actor, "changes": _bounded(found)}
        with connection.cursor() as cursor:
            cursor.execute(statements.RECORD_REPAIR, [json.dumps(record), job_id])
    logger.info(
        "dead letter %s repaired (%d changes) and requeued as job %s by %s",
        dead.pk,
        len(found),
        job_id,
        actor,
        extra={
            "dead_letter_id": dead.pk,
            "job_id": job_id,
            "attempt": 0,
            "changes": len(found),
            "actor": actor,
        },
    )
    return Repaired(Job.objects.get(pk=job_id), found)


def _bounded(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The changes as recorded: without their values when those exceed the arguments' size limit."""
    if len(json.dumps(found)) <= jobretry_settings.max_args_bytes:
        return found
    return [{"path": c["path"], "change": c["change"], "values_omitted": True} for c in found]
