"""A task's circuit breaker: counted where failures are recorded, moved on by every worker's heartbeat.

- **Counting** (:func:`count_failure`) runs in the transaction that writes
  the failure, on the breaker's row lock: any number of workers agree on the
  count, and exactly one of them sees it reach the threshold and opens it.
- **Open**: the claim skips the task's jobs (holds/sql.py). A job
  raising ``CircuitOpen`` opens it too (:func:`hold_task`). Each beat parks
  the held jobs at the breaker's end (their ``run_at``), so other tasks'
  claims do not walk past them; their held time is counted as they move.
- **Half-open**: once the cooldown is over, a worker's heartbeat
  (:func:`beat`) makes the task's due job with the most attempts left the
  probe, the one job the claim lets through, for one attempt.
- The probe's fate decides: a success closes the breaker and releases the
  held jobs ``1 / release_per_second`` apart; a retry, a lost lease or a
  death reopens it with the cooldown doubled (capped); a probe that is gone
  or waiting (cancelled, snoozed, fatal) is replaced by the next due job.

Each breaker row carries its own cooldown, cap and release rate, so workers
of two deploys never disagree about an opening already made.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction

from django_jobretry import signals
from django_jobretry.display import humanize_delay
from django_jobretry.holds import sql
from django_jobretry.jobs import statements
from django_jobretry.jobs.enqueue import notify
from django_jobretry.jobs.history import clean_text
from django_jobretry.jobs.isolation import Apart
from django_jobretry.jobs.sql import named_rows
from django_jobretry.models import Circuit
from django_jobretry.models.holds import REASON_MAX_LENGTH
from django_jobretry.policy import CircuitBreaker
from django_jobretry.policy.circuit import next_cooldown

logger = logging.getLogger("django_jobretry")

#: What a ``CircuitOpen`` of a task with no breaker configured reopens up to, and releases at.
UNCONFIGURED_CAP = 900.0
UNCONFIGURED_RATE = 10.0
#: Most held jobs a beat moves to their breaker's end: a backlog is parked over a few beats,
#: never in one long statement on the heartbeat's connection.
PARKED_PER_BEAT = 10_000


@dataclass(frozen=True)
class Opened:
    """A breaker that opened (or reopened): until when, and how many openings in a row."""

    task_name: str
    open_until: datetime
    opens: int
    reason: str


def count_failure(task_name: str, breaker: CircuitBreaker, error_class: str) -> Opened | None:
    """Count one retryable failure of ``task_name``; open the breaker once it reaches the threshold.

    Call in the transaction that writes the failure. The opening's signal and
    log line follow the commit.
    """
    with connection.cursor() as cursor:
        cursor.execute(sql.COUNT_FAILURE, {"task": task_name, "window": breaker.window.total_seconds()})
        row = cursor.fetchone()
    if row is None or row[0] < breaker.failures:
        return None
    reason = f"{row[0]} failures within {humanize_delay(breaker.window)} (the last: {error_class})"
    cooldown, cap = breaker.cooldown.total_seconds(), breaker.max_cooldown.total_seconds()
    return _open(task_name, cooldown, cap, breaker.release_per_second, reason)


def hold_task(task_name: str, for_: timedelta, breaker: CircuitBreaker | None, job_id: int) -> Opened:
    """Open the breaker of ``task_name`` for ``for_``: job ``job_id`` raised ``CircuitOpen``."""
    reason = f"job {job_id} raised CircuitOpen for {humanize_delay(for_)}"
    cap = UNCONFIGURED_CAP if breaker is None else breaker.max_cooldown.total_seconds()
    rate = UNCONFIGURED_RATE if breaker is None else breaker.release_per_second
    return _open(task_name, for_.total_seconds(), cap, rate, reason)


def _open(task_name: str, cooldown: float, cap: float, rate: float, reason: str) -> Opened:
    """Open the breaker for ``cooldown`` s; it reopens up to ``cap`` s and releases ``rate`` jobs a second."""
    params: dict[str, Any] = {
        "task": task_name,
        "cooldown": cooldown,
        "max_cooldown": max(cooldown, cap),
        "rate": rate,
        "reason": clean_text(reason, REASON_MAX_LENGTH),
    }
    with connection.cursor() as cursor:
        cursor.execute(sql.OPEN, params)
        row = named_rows(cursor)[0]
    opened = Opened(task_name, row["open_until"], row["opens"], params["reason"])
    transaction.on_commit(lambda: _announce_open(opened))
    return opened


def _announce_open(opened: Opened) -> None:
    logger.warning(
        "circuit of task %s open until %s (opening %d in a row): %s",
        opened.task_name,
        opened.open_until.isoformat(),
        opened.opens,
        opened.reason,
        extra=_extra(opened.task_name, "circuit_opened", open_until=opened.open_until, opens=opened.opens),
    )
    signals.send(
        signals.circuit_opened,
        Circuit,
        _extra(opened.task_name, "circuit_opened"),
        task_name=opened.task_name,
        open_until=opened.open_until,
        opens=opened.opens,
        reason=opened.reason,
    )


def breakers() -> Apart:
    """The breakers one heartbeat judges, beat after beat: each alone, each failing stretch logged once."""
    return Apart("circuit of task", "task_name")


def beat(apart: Apart | None = None) -> None:
    """Move on every breaker whose cooldown ended or whose probe is out, that no other worker holds;
    then park the jobs the open ones hold (:data:`~django_jobretry.jobs.statements.PARK`).

    Each breaker is judged alone (jobs/isolation.py): one that cannot be
    moved on is logged by its task's name and left as it is, and the others
    move on. ``apart``: the heartbeat's own, so a breaker failing beat after
    beat is logged once per stretch.
    """
    apart = apart or breakers()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.DUE_CIRCUITS)
        for row in named_rows(cursor):
            with apart.one(row["task_name"], "move its breaker on"):
                _judge(row)
    with connection.cursor() as cursor:
        cursor.execute(statements.PARK, {"limit": PARKED_PER_BEAT})


def _judge(row: dict[str, Any]) -> None:
    """One breaker, locked: probe, close, reopen or wait."""
    task, status = row["task_name"], row["probe_status"]
    if row["state"] == "open":
        _probe_or_close(task, row["release_per_second"])
    elif status == "succeeded":
        _close(task, row["release_per_second"], f"probe job {row['probe_job_id']} succeeded")
    elif (status == "ready" and row["probe_now"] > row["probe_attempts"]) or row["probe_died"]:
        cap, rate = row["max_cooldown_seconds"], row["release_per_second"]
        cooldown = next_cooldown(row["cooldown_seconds"], cap)
        _open(task, cooldown, cap, rate, f"probe job {row['probe_job_id']} failed")
    elif status is None or (status == "ready" and row["probe_later"]):
        _probe_or_close(task, row["release_per_second"])


def _probe_or_close(task: str, rate: float) -> None:
    """Let a due job of the task through as the probe (statements.CHOOSE_PROBE); with none due, close."""
    with connection.cursor() as cursor:
        cursor.execute(statements.CHOOSE_PROBE, {"task": task})
        row = cursor.fetchone()
    if row is None:
        _close(task, rate, "no job of the task was due to probe with")
        return
    probe_id, queue = row
    notify([queue])
    logger.info(
        "circuit of task %s half-open: job %s is the probe",
        task,
        probe_id,
        extra=_extra(task, "circuit_half_open", job_id=probe_id),
    )
    transaction.on_commit(
        lambda: signals.send(
            signals.circuit_half_open,
            Circuit,
            _extra(task, "circuit_half_open"),
            task_name=task,
            probe_job_id=probe_id,
        )
    )


@dataclass(frozen=True)
class Closed:
    """A breaker closed: how many held jobs it released, and how many a second."""

    released: int
    rate: float


def _close(task: str, rate: float, why: str) -> Closed:
    rate = usable_rate(task, rate)
    with connection.cursor() as cursor:
        cursor.execute(statements.CLOSE, {"task": task, "spacing": 1.0 / rate})
        released, queues = cursor.fetchone()
    notify(queues)
    logger.info(
        "circuit of task %s closed: %s; %d held job(s) released, %g a second",
        task,
        why,
        released,
        rate,
        extra=_extra(task, "circuit_closed", released=released),
    )
    transaction.on_commit(
        lambda: signals.send(
            signals.circuit_closed,
            Circuit,
            _extra(task, "circuit_closed"),
            task_name=task,
            released=released,
        )
    )
    return Closed(released, rate)


def usable_rate(task: str, rate: float) -> float:
    """``rate``, or the default one when the row holds a rate no release can use (logged, naming the task).

    A policy refuses such a rate, and the schema too since migration 0031;
    a row written by hand or before then may still hold one. Without this
    its breaker could never close: its held jobs would wait for ever.
    """
    if math.isfinite(rate) and rate > 0:
        return rate
    logger.warning(
        "circuit of task %s: its release rate %r is not a number of jobs a second > 0; releasing %g a second",
        task,
        rate,
        UNCONFIGURED_RATE,
        extra=_extra(task, "circuit_rate_replaced", release_per_second=UNCONFIGURED_RATE),
    )
    return UNCONFIGURED_RATE


def close(task_name: str, *, actor: str) -> bool:
    """Close the breaker of ``task_name`` by hand (an operator's decision), releasing its held jobs.

    False when it was not open (nothing was done).
    """
    return close_by_hand(task_name, actor=actor) is not None


def close_by_hand(task_name: str, *, actor: str) -> Closed | None:
    """:func:`close`, saying how many held jobs it released and how fast; None when it was not open.

    Every job the breaker holds is released at its release rate: those due,
    those parked at its end and the one that raised ``CircuitOpen``
    (statements.CLOSE), not only those due now.
    """
    with transaction.atomic():
        row = Circuit.objects.select_for_update().filter(task_name=task_name).exclude(state="closed").first()
        if row is None:
            return None
        return _close(task_name, row.release_per_second, f"closed by {actor}")


def _extra(task: str, outcome: str, **more: Any) -> dict[str, Any]:
    return {"task_name": task, "outcome": outcome, **more}
