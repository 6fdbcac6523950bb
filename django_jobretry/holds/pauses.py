"""Pausing and resuming a queue or a task, for every worker on every host at once.

A pause is a row the claim statement reads (holds/sql.py): once
committed, no worker claims a job it holds, with no cache to go stale.
Jobs already running finish. A resume wakes idle workers of the released
queues with NOTIFY, so they claim at once rather than at their next poll.
Each pause and resume is logged with who did it and sent as a signal; the
admin also records it in its history (holds/admin.py).

A pause of a misspelt name holds nothing and looks as if it did, so a
pause is refused unless its name is known (:func:`unknown`), with the close
known names:

- a task is known if it is registered in this process (``@job``, ``@task``)
  or some job row has it (a task registered only on the workers' hosts);
- a queue is known if it is ``"default"``, the queue of a registered task
  (``@job(queue_name=...)``), listed in ``QUEUES`` of a ``TASKS`` backend
  of ours or in ``JOBRETRY["QUEUE_LIMITS"]``, or some job row has it.

"Some job row has it" is any status, finished jobs included: the name was
real once. To hold a task or queue before its code is deployed, the caller
says so (``pause(..., undeployed=True)``, ``pause --undeployed``, the
admin form's "not deployed yet" box).

The heartbeat's :class:`Holds` duty ends the pauses whose ``until`` passed
and moves the breakers on (holds/breakers.py).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.conf import settings
from django.db import connection, transaction

from django_jobretry import signals
from django_jobretry.display import did_you_mean
from django_jobretry.exceptions import InvalidJob
from django_jobretry.holds import breakers, sql
from django_jobretry.jobs import statements
from django_jobretry.jobs.enqueue import notify
from django_jobretry.jobs.history import clean_text, recorded_actor
from django_jobretry.jobs.sql import named_rows
from django_jobretry.limits import queue_limits
from django_jobretry.models import Job, Pause
from django_jobretry.models.holds import REASON_MAX_LENGTH
from django_jobretry.models.instants import EARLIEST, LATEST, check_run_after, is_text
from django_jobretry.policy.limits import InvalidLimit
from django_jobretry.registry import registry

logger = logging.getLogger("django_jobretry")

#: Who ends a pause whose ``until`` passed, in logs and signals.
EXPIRED_ACTOR = "expired"
#: Longest queue and task names (the jobs table's columns).
NAME_LENGTHS = {"queue_name": 100, "task_name": 200}
#: Distinct names read from the jobs table to suggest one: enough for any real deployment.
CANDIDATES = 1000
#: The queue a job gets when nothing names one.
DEFAULT_QUEUE = "default"


class InvalidHold(InvalidJob):
    """A pause or resume was refused: the message names the value and what is allowed."""


class UnknownName(InvalidHold):
    """A pause of a name neither declared nor on any job (:func:`unknown`), without ``undeployed``.

    ``problem`` says so with the close names; the message adds the Python
    way to pause it anyway, and the command and the admin their own.
    """

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"{problem} To pause it before it is deployed, pass undeployed=True.")


@dataclass(frozen=True)
class Target:
    """A queue or a task: what a pause holds."""

    kind: Literal["queue", "task"]
    name: str

    @property
    def column(self) -> str:
        return f"{self.kind}_name"

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True)
class Ended:
    """A pause that ended: what it held, since when, and how many ready jobs it let go."""

    target: Target
    paused_by: str
    reason: str
    paused_at: datetime
    held: int


def target(*, queue: str | None = None, task: str | None = None) -> Target:
    """The one queue or task named; InvalidHold for none, both, or a name no job could have."""
    if (queue is None) == (task is None):
        raise InvalidHold("name exactly one queue or one task to pause or resume")
    kind: Literal["queue", "task"] = "queue" if queue is not None else "task"
    name = queue if queue is not None else task
    limit = NAME_LENGTHS[f"{kind}_name"]
    if not isinstance(name, str) or not name.strip() or len(name) > limit or not is_text(name):
        raise InvalidHold(
            f"{kind} {name!r} is not a {kind} name: expected 1 to {limit} characters of text "
            "(no NUL; a name that is not UTF-8 cannot be one)"
        )
    return Target(kind, name)


def check_known(where: Target) -> None:
    """UnknownName for a queue or task no pause should hold: neither declared nor on any job."""
    problem = unknown(where.kind, where.name)
    if problem is not None:
        raise UnknownName(problem)


def check_until(until: object) -> None:
    """InvalidHold for an ``until`` no pause can end at: not a time or a delay, naive, past or out of range.

    What the database's clock alone can tell (a time that passed a moment
    ago) :func:`pause` checks as it stores the pause.
    """
    if until is None:
        return
    if not isinstance(until, datetime | timedelta):
        raise InvalidHold(f"until {until!r} is not a datetime or a timedelta")
    if isinstance(until, datetime) and until.tzinfo is None:
        raise InvalidHold(
            f"until {until.isoformat()} has no time zone: give an aware datetime or a timedelta"
        )
    if isinstance(until, timedelta) and until <= timedelta(0):
        raise InvalidHold(f"until {until} is not in the future: give a positive delay or a later time")
    try:
        check_run_after(until)
    except InvalidJob:
        shown = until.isoformat() if isinstance(until, datetime) else str(until)
        raise InvalidHold(
            f"until {shown} is out of range: a pause ends from {EARLIEST.date().isoformat()} "
            f"to {LATEST.date().isoformat()} UTC"
        ) from None


def pause(
    *,
    queue: str | None = None,
    task: str | None = None,
    actor: str,
    reason: str = "",
    until: datetime | timedelta | None = None,
    undeployed: bool = False,
) -> bool:
    """Hold every ready job of the queue or task until it is resumed (or until ``until``).

    True if it was not paused before; a second pause of the same target
    changes who, why and until. ``until`` is a time or a delay from now.
    A name neither declared nor on any job is refused (:class:`UnknownName`,
    with the close names) unless ``undeployed``: the task or queue of code
    not deployed yet, held from its first job.
    """
    where = target(queue=queue, task=task)
    check_until(until)
    if not undeployed:
        check_known(where)
    params: dict[str, Any] = {
        "name": where.name,
        "actor": recorded_actor(actor),
        "reason": clean_text(reason, REASON_MAX_LENGTH),
        "until": None,
    }
    with transaction.atomic(), connection.cursor() as cursor:
        if until is not None:
            cursor.execute("SELECT statement_timestamp()")
            now = cursor.fetchone()[0]
            params["until"] = now + until if isinstance(until, timedelta) else until
            if params["until"] <= now:
                shown = until.isoformat() if isinstance(until, datetime) else str(until)
                raise InvalidHold(f"until {shown} has passed (the database's time is {now.isoformat()})")
        cursor.execute(sql.pause_sql(where.column), params)
        row = named_rows(cursor)[0]
    logger.info(
        "%s paused by %s%s",
        where,
        params["actor"],
        f" until {row['until'].isoformat()}" if row["until"] else "",
        extra=_extra(where, "paused", params["actor"], until=row["until"]),
    )
    _send(signals.work_paused, "paused", where, params["actor"], reason=params["reason"], until=row["until"])
    return bool(row["created"])


def resume(*, queue: str | None = None, task: str | None = None, actor: str) -> Ended | None:
    """Let the queue's or task's jobs be claimed again, now; None if it was not paused."""
    where = target(queue=queue, task=task)
    ended = _end(f"{where.column} = %(name)s", {"name": where.name}, recorded_actor(actor))
    return ended[0] if ended else None


def end_expired() -> list[Ended]:
    """End the pauses whose ``until`` has passed (a worker's heartbeat duty): their held time is counted."""
    return _end("until <= statement_timestamp()", {}, EXPIRED_ACTOR)


def _end(where: str, params: Mapping[str, Any], actor: str) -> list[Ended]:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statements.end_pauses_sql(where), params)
        rows = named_rows(cursor)
        notify(sorted({queue for row in rows for queue in row["queues"]}))
    ended = []
    for row in rows:
        kind: Literal["queue", "task"] = "queue" if row["queue_name"] is not None else "task"
        name = row["queue_name"] if kind == "queue" else row["task_name"]
        done = Ended(Target(kind, name), row["paused_by"], row["reason"], row["paused_at"], row["held"])
        logger.info(
            "%s resumed by %s after a pause by %s; %d ready job(s) released",
            done.target,
            actor,
            done.paused_by,
            done.held,
            extra=_extra(done.target, "resumed", actor, released=done.held),
        )
        _send(signals.work_resumed, "resumed", done.target, actor, reason=done.reason, until=row["until"])
        ended.append(done)
    return ended


def pauses() -> list[Pause]:
    """The pauses in force, queues first."""
    return list(Pause.objects.order_by("task_name", "queue_name"))


def _extra(where: Target, outcome: str, actor: str, **more: Any) -> dict[str, Any]:
    return {where.column: where.name, "outcome": outcome, "actor": actor, **more}


def _send(
    signal: Any, outcome: str, where: Target, actor: str, *, reason: str, until: datetime | None
) -> None:
    signals.send(
        signal,
        Pause,
        _extra(where, outcome, actor),
        queue_name=where.name if where.kind == "queue" else None,
        task_name=where.name if where.kind == "task" else None,
        actor=actor,
        reason=reason,
        until=until,
    )


# -- known names ------------------------------------------------------------------------------------
def declared_tasks() -> set[str]:
    return set(registry.names())


def declared_queues() -> set[str]:
    """The queues the code and settings of this process name (not the jobs table)."""
    queues = {DEFAULT_QUEUE}
    queues |= {task.queue_name for name in registry.names() if (task := registry.get(name)) is not None}
    tasks = getattr(settings, "TASKS", None)
    for backend in tasks.values() if isinstance(tasks, Mapping) else ():
        if isinstance(backend, Mapping) and str(backend.get("BACKEND", "")).endswith("JobRetryBackend"):
            listed = backend.get("QUEUES")
            queues |= {str(queue) for queue in listed} if isinstance(listed, list | tuple | set) else set()
    with contextlib.suppress(InvalidLimit):  # check E050 reports it; a pause need not
        queues |= set(queue_limits())
    return queues


def is_known(kind: str, name: str) -> bool:
    """Whether the queue or task (``kind``) is declared, or on a job: one lookup at most."""
    declared = declared_queues() if kind == "queue" else declared_tasks()
    return name in declared or Job.objects.filter(**{f"{kind}_name": name}).exists()


def unknown(kind: str, name: str) -> str | None:
    """Why a pause of this queue or task would hold nothing, with the close names; None if it is known."""
    if is_known(kind, name):
        return None
    declared = declared_queues() if kind == "queue" else declared_tasks()
    seen = Job.objects.order_by().values_list(f"{kind}_name", flat=True).distinct()[:CANDIDATES]
    other = "task" if kind == "queue" else "queue"
    also = f" It is a {other}'s name: pause the {other} instead." if is_known(other, name) else ""
    return (
        f"{kind} {name!r} is not declared and no job has it, so its pause would hold nothing."
        f"{did_you_mean([name], {*declared, *seen})}{also}"
    )


class Holds:
    """The heartbeat's duty: expired pauses ended, breakers moved on.

    A breaker gets a probe once its cooldown ends, and closes or reopens
    once its probe's fate is known: up to one beat later. Every worker takes
    part, each breaker row locked by one of them at a time.

    A ``worker.heartbeat.Duty`` in all but its base class: the worker imports
    this class by its path in features.py, so it imports nothing of the
    worker, and says each of the four steps itself (only :meth:`beat` acts).
    """

    failure = "move the pauses and breakers on"

    def __init__(self) -> None:
        #: The breakers this heartbeat judges, each alone: which of them failed at the last beat.
        self.breakers = breakers.breakers()

    def start(self) -> None:
        pass

    def beat(self, running: int) -> None:
        end_expired()
        breakers.beat(self.breakers)

    def finish(self) -> None:
        pass

    def close(self) -> None:
        pass
