"""One chunk of a bulk requeue or discard: a bounded number of statements, whatever its size.

A chunk locks its dead letters in id order (two bulk actions over
overlapping sets cannot deadlock, and the second waits, then finds the rows
the first removed gone: "already handled"), then acts on the whole set in one
statement: jobs/failures.revive's ``INSERT ... SELECT`` with the unique-key
guard, or one ``DELETE``. Counters are appended in one more statement, and
one NOTIFY goes out per queue. Only dead letters of another source (django-q2)
go one by one, to the system they came from.

What every surface of the dead-letter service says after a chunk commits is
here too (``announce_*``), with the actor, whichever surface (admin, command,
Python API) acted: an operator's action is never silent in the logs of the
process that made it. A chunk of one dead letter gets one line naming it; a
larger chunk one summary line (every id in its ``extra``), the per-chunk
signal, and one DEBUG line per dead letter when DEBUG is on. The per-row
signals (``job_requeued``, ``dead_letter_discarded``) are sent for every dead
letter only while a receiver is connected: at 100,000 dead letters each
receiver's cost is paid 100,000 times (docs/dead-letters.md#signals).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NamedTuple

from django.db import connection, transaction
from django.dispatch import Signal

from django_jobretry import signals
from django_jobretry.console import counters
from django_jobretry.deadletters.external import Resubmitted, resubmitter_for
from django_jobretry.exceptions import RequeueConflict
from django_jobretry.jobs import statements
from django_jobretry.jobs.enqueue import notify
from django_jobretry.jobs.failures import revive
from django_jobretry.jobs.sql import DEAD
from django_jobretry.models import CounterEvent, DeadLetter, DeadLetterSource
from django_jobretry.registry import policy_for

logger = logging.getLogger("django_jobretry")

#: Dead letters one chunk locks and acts on: one transaction of a few tens of milliseconds.
CHUNK = 2_000

_LOCK = f"""
    SELECT id, job_id, task_name, queue_name, policy_name, attempts, source,
           unique_key IS NOT NULL OR schedule_name IS NOT NULL AS keyed
    FROM {DEAD} WHERE id = ANY(%s::bigint[]) ORDER BY id FOR UPDATE
"""


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
        revived = revive(_allowed(ours), run_after=run_after, actor=actor, guarded=guarded)
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
            cursor.execute(statements.DISCARD, [[dead.id for dead in locked]])
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


def announce_requeue(row: Requeued, actor: str | None) -> None:
    """Log and signal one committed requeue: who, which dead letter, what it became."""
    _one_requeue(row, actor, True, level=logging.INFO)


def announce_requeues(done: Sequence[Requeued], actor: str | None) -> None:
    """Log and signal a committed chunk of requeues (see the module docstring)."""
    if len(done) == 1:
        announce_requeue(done[0], actor)
    elif done:
        more = {"job_ids": [row.job_id for row in done]}
        _announce_chunk(done, "requeued", actor, signals.dead_letters_requeued, more)
        rows, signal = _per_row(done, signals.job_requeued)
        for row in rows:
            _one_requeue(row, actor, signal)


def announce_discards(done: Sequence[Locked], actor: str | None) -> None:
    """Log and signal a committed chunk of discards (see the module docstring)."""
    if len(done) == 1:
        announce_discard(done[0], actor)
    elif done:
        _announce_chunk(done, "discarded", actor, signals.dead_letters_discarded, {})
        rows, signal = _per_row(done, signals.dead_letter_discarded)
        for row in rows:
            _one_discard(row, actor, signal)


def announce_discard(dead: Locked, actor: str | None) -> None:
    """Log and signal one committed discard, with who did it."""
    _one_discard(dead, actor, True, level=logging.INFO)


def _announce_chunk(
    done: Sequence[Requeued | Locked],
    outcome: str,
    actor: str | None,
    chunk_signal: Signal,
    more: dict[str, Any],
) -> None:
    """The summary line, and ``chunk_signal`` with ``outcome``: a list of (dead letter id, job id)."""
    extra = {
        "dead_letter_ids": [row.id for row in done],
        "count": len(done),
        "tasks": sorted({row.task_name for row in done}),
        "queues": sorted({row.queue_name for row in done}),
        "attempt": 0,
        "outcome": outcome,
        "actor": actor or "",
        **more,
    }
    by = actor or "an unnamed caller"
    logger.info(
        "%d dead letters (ids %s to %s) %s by %s",
        len(done),
        done[0].id,
        done[-1].id,
        outcome,
        by,
        extra=extra,
    )
    # What a failing receiver's log line keeps: not every id again.
    brief = {key: value for key, value in extra.items() if not key.endswith("_ids")}
    pairs = [(row.id, row.job_id) for row in done]
    signals.send(chunk_signal, DeadLetter, brief, **{outcome: pairs}, actor=actor)


def _per_row[Row: (Requeued, Locked)](done: Sequence[Row], row_signal: Signal) -> tuple[Sequence[Row], bool]:
    """The rows that get their own DEBUG line (all, if the signal or DEBUG has an audience), and
    whether each also sends ``row_signal``: asked once per chunk, not per row."""
    signal = row_signal.has_listeners(DeadLetter)
    return (done if signal or logger.isEnabledFor(logging.DEBUG) else ()), signal


def _one_requeue(row: Requeued, actor: str | None, signal: bool, level: int = logging.DEBUG) -> None:
    extra = {
        "dead_letter_id": row.id,
        "job_id": row.job_id,
        "task": row.task_name,
        "queue": row.queue_name,
        "attempt": 0,
        "outcome": "requeued",
        "actor": actor or "",
        "requeue_count": row.requeue_count,
    }
    logger.log(
        level,
        "dead letter %s (%s, queue %s) requeued as %s %s by %s",
        row.id,
        row.task_name,
        row.queue_name,
        "job" if row.became == "job" else f"{row.became} task",
        row.job_id,
        actor or "an unnamed caller",
        extra=extra,
    )
    if signal:
        signals.send(
            signals.job_requeued,
            DeadLetter,
            extra,
            dead_letter_id=row.id,
            job_id=row.job_id,
            task_name=row.task_name,
            queue_name=row.queue_name,
            requeue_count=row.requeue_count,
            actor=actor,
        )


def _one_discard(dead: Locked, actor: str | None, signal: bool, level: int = logging.DEBUG) -> None:
    extra = {
        "dead_letter_id": dead.id,
        "job_id": dead.job_id,
        "task": dead.task_name,
        "queue": dead.queue_name,
        "attempt": dead.attempts,
        "outcome": "discarded",
        "actor": actor or "",
    }
    logger.log(
        level,
        "dead letter %s (%s, queue %s) discarded by %s",
        dead.id,
        dead.task_name,
        dead.queue_name,
        actor or "an unnamed caller",
        extra=extra,
    )
    if signal:
        signals.send(
            signals.dead_letter_discarded,
            DeadLetter,
            extra,
            dead_letter_id=dead.id,
            job_id=dead.job_id,
            task_name=dead.task_name,
            queue_name=dead.queue_name,
            actor=actor,
        )
