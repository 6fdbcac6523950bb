"""One chunk of a bulk requeue or discard: a bounded number of statements, whatever its size.

A chunk locks its dead letters in id order (two bulk actions over
overlapping sets cannot deadlock, and the second waits, then finds the rows
the first removed gone: "already handled"), then acts on the whole set in one
statement: transitions.revive's ``INSERT ... SELECT`` with the unique-key
guard, or one ``DELETE``. Counters are appended in one more statement, and
one NOTIFY goes out per queue. Only dead letters of another source (django-q2)
go one by one, to the system they came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple

from django.db import connection, transaction

from django_jobretry.console import counters
from django_jobretry.exceptions import RequeueConflict
from django_jobretry.models import CounterEvent, DeadLetter, DeadLetterSource
from django_jobretry.registry import policy_for
from django_jobretry.services import transitions
from django_jobretry.services.enqueue import notify
from django_jobretry.services.resubmitters import Resubmitted, resubmitter_for
from django_jobretry.services.sql import DEAD

#: Dead letters one chunk locks and acts on: one transaction of a few tens of milliseconds.
CHUNK = 2_000

_LOCK = f"""
    SELECT id, job_id, task_name, queue_name, policy_name, attempts, source,
           unique_key IS NOT NULL OR schedule_name IS NOT NULL AS keyed
    FROM {DEAD} WHERE id = ANY(%s::bigint[]) ORDER BY id FOR UPDATE
"""
_DISCARD = f"DELETE FROM {DEAD} WHERE id = ANY(%s::bigint[])"


class Requeued(NamedTuple):
    """A dead letter a chunk requeued, and what it became: a job, or another system's task."""

    id: int
    job_id: int | str
    task_name: str
    queue_name: str
    requeue_count: int
    #: "job", or the source it went back to ("django_q2").
    became: str = "job"

    @classmethod
    def of(cls, dead: Locked, job_id: int, requeue_count: int) -> Requeued:
        return cls(dead.id, job_id, dead.task_name, dead.queue_name, requeue_count)


class Locked(NamedTuple):
    """The columns of a locked dead letter that an action logs, signals and counts by."""

    id: int
    job_id: int
    task_name: str
    queue_name: str
    policy_name: str
    attempts: int
    source: str
    #: Has a unique_key or a schedule slot: a unique index of the jobs table may refuse its revival.
    keyed: bool


@dataclass
class Outcome:
    """What one chunk did, in id order."""

    done: list[Requeued | Locked]
    already_handled: list[int]
    #: One per dead letter left dead: its unique_key is held, or its source refused it (CannotResubmit).
    refusals: list[RequeueConflict]


def chunks(ids: list[int], size: int = CHUNK) -> Iterator[list[int]]:
    """``ids`` in slices of at most ``size``."""
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def lock(ids: list[int]) -> tuple[list[Locked], list[int]]:
    """Lock ``ids`` in id order; returns the rows still there and the ids that are gone."""
    with connection.cursor() as cursor:
        cursor.execute(_LOCK, [ids])
        locked = [Locked(*row) for row in cursor.fetchall()]
    found = {dead.id for dead in locked}
    return locked, [i for i in ids if i not in found]


def requeue(ids: list[int], *, run_after: timedelta | None, actor: str) -> Outcome:
    """Requeue the still-dead letters of ``ids`` in one transaction; the rest are reported."""
    with transaction.atomic():
        locked, gone = lock(ids)
        ours = [dead for dead in locked if dead.source == DeadLetterSource.JOBRETRY]
        guarded = any(dead.keyed for dead in ours)
        revived = transitions.revive(_allowed(ours), run_after=run_after, actor=actor, guarded=guarded)
        by_id = {dead.id: dead for dead in ours}
        done: list[Requeued | Locked] = [
            Requeued.of(by_id[r.dead_letter_id], r.job_id, r.requeue_count)
            for r in revived
            if r.job_id is not None
        ]
        refusals = [
            RequeueConflict(r.dead_letter_id, r.unique_key or "", r.taken_until)
            for r in revived
            if r.job_id is None
        ]
        for dead in locked:
            if dead.source != DeadLetterSource.JOBRETRY:
                try:
                    done.append(_resubmitted(dead, actor))
                except RequeueConflict as refused:  # CannotResubmit: no adapter, or the other system refused
                    refusals.append(refused)
        counters.count(CounterEvent.REQUEUED, [(row.task_name, row.queue_name) for row in done])
        notify(sorted({row.queue_name for row in done if isinstance(row, Requeued) and row.became == "job"}))
    refusals.sort(key=lambda refused: refused.dead_letter_id)
    return Outcome(sorted(done, key=lambda row: row.id), gone, refusals)


def discard(ids: list[int]) -> Outcome:
    """Delete the still-dead letters of ``ids`` in one transaction; the rest are reported."""
    with transaction.atomic():
        locked, gone = lock(ids)
        with connection.cursor() as cursor:
            cursor.execute(_DISCARD, [[dead.id for dead in locked]])
        counters.count(CounterEvent.DISCARDED, [(dead.task_name, dead.queue_name) for dead in locked])
    return Outcome(list(locked), gone, [])


def _allowed(locked: Iterable[Locked]) -> dict[int, int]:
    """Each dead letter's max_attempts: its current policy's, which an operator may have raised."""
    policies: dict[tuple[str, str], int] = {}
    allowed = {}
    for dead in locked:
        key = (dead.task_name, dead.policy_name)
        if key not in policies:
            policies[key] = policy_for(*key).max_attempts
        allowed[dead.id] = policies[key]
    return allowed


def _resubmitted(dead: Locked, actor: str) -> Requeued:
    """A dead letter of another source, handed back to it under the chunk's lock, in a savepoint."""
    row = DeadLetter.objects.get(pk=dead.id)
    with transaction.atomic():
        task: Resubmitted = resubmitter_for(row)(row, actor)
    return Requeued(dead.id, task.pk, task.task_name, task.queue_name, task.requeue_count, task.source)
