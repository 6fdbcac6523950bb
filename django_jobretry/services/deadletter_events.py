"""What every surface of the dead-letter service says after a requeue or discard commits.

With the actor, whichever surface (admin, command, Python API) acted: an
operator's action is never silent in the logs of the process that made it.
A chunk of one dead letter gets one line naming it; a larger chunk one
summary line (every id in its ``extra``), the per-chunk signal, and one
DEBUG line per dead letter when DEBUG is on. The per-row signals
(``job_requeued``, ``dead_letter_discarded``) are sent for every dead letter
only while a receiver is connected: at 100,000 dead letters each receiver's
cost is paid 100,000 times (docs/dead-letters.md#signals).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.dispatch import Signal

from django_jobretry import signals
from django_jobretry.models import DeadLetter
from django_jobretry.services.dead_letter_chunks import Locked, Requeued

logger = logging.getLogger("django_jobretry")


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
