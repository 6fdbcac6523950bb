"""Holds: pauses of a queue or task, and each task's circuit breaker, enforced in the claim.

This module is what holds jobs back right now, for operators: `jobstatus`,
the dashboard, the admin, the metrics. One line per pause in force and per
breaker that is not closed, each with the number of jobs it holds, counted
by :func:`held_by_pause` and :func:`held_by_breaker` wherever a hold's jobs
are counted (`pause`, `jobstatus`, the dashboard, the Pauses and Circuit
breakers pages, the metrics), so every place shows the same number. Counted
with one query per hold; there are a handful. Times are the database's
(docs/design.md#rule-5). The rest of the folder:

- ``sql``: the statements of pauses, breakers and snoozes (layer 3);
- ``pauses``: pause and resume, the names a pause may hold, and the heartbeat's
  ``Holds`` duty (layer 3);
- ``breakers``: count failures, open, probe, close (layer 3);
- ``admin``: the Pauses and Circuit breakers pages; ``panel``: the dashboard's
  Held panel and the "are you sure?" page; ``cli``: `pause`, `resume`,
  `jobstatus`' Held section and the metrics (layer 5).

The claim's filter is the state machine's (jobs/sql.py not_held); the models
stay in models/holds.py; the pure breaker values in policy/circuit.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Q
from django.db.models.functions import Now

from django_jobretry.models import Circuit, CircuitState, Job, JobStatus, Pause
from django_jobretry.models.job_states import DUE, PAUSE_IN_FORCE


@dataclass(frozen=True)
class PauseLine:
    """A queue or task paused by an operator: who, why, since and until when, and how many due jobs wait."""

    kind: str  # "queue" or "task"
    name: str
    paused_by: str
    reason: str
    paused_at: datetime
    until: datetime | None
    held: int
    #: The row's primary key: what the admin's "Resume selected" action takes.
    pause_id: int


@dataclass(frozen=True)
class CircuitLine:
    """A task whose breaker is open or half-open, and how many of its due jobs it holds."""

    task_name: str
    state: str  # CircuitState value
    opened_at: datetime | None
    open_until: datetime | None
    opens: int
    probe_job_id: int | None
    reason: str
    held: int


@dataclass(frozen=True)
class HoldsReport:
    pauses: list[PauseLine]
    circuits: list[CircuitLine]


def anything_held() -> bool:
    """Whether a pause is in force or a breaker is not closed, in one query: pages show the report then."""
    pauses, breakers = Pause._meta.db_table, Circuit._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {pauses} WHERE until IS NULL OR until > statement_timestamp()) "
            f"OR EXISTS (SELECT 1 FROM {breakers} WHERE state <> 'closed')"
        )
        return bool(cursor.fetchone()[0])


def holds_report() -> HoldsReport:
    """The pauses in force and the breakers not closed, with the due jobs each holds."""
    pauses = [
        PauseLine(
            "queue" if row.queue_name is not None else "task",
            row.queue_name if row.queue_name is not None else str(row.task_name),
            row.paused_by,
            row.reason,
            row.paused_at,
            row.until,
            held_by_pause(*_target(row)),
            row.pk,
        )
        for row in Pause.objects.filter(PAUSE_IN_FORCE).order_by("task_name", "queue_name")
    ]
    circuits = [
        CircuitLine(
            row.task_name,
            row.state,
            row.opened_at,
            row.open_until,
            row.opens,
            row.probe_job_id,
            row.reason,
            held_by_breaker(row),
        )
        for row in Circuit.objects.exclude(state=CircuitState.CLOSED).order_by("task_name")
    ]
    return HoldsReport(pauses, circuits)


def held_by_pause(kind: str, name: str) -> int:
    """The jobs a pause of the queue or task ``name`` (``kind``) holds now: its ready jobs that are due.

    What the claim would take but for the pause. A job also behind its
    task's breaker or another pause counts on each line that holds it; a job
    due later is not held yet (it is once due, if the pause is still in
    force), and a running job finishes.
    """
    return Job.objects.filter(DUE, **{f"{kind}_name": name}).count()


def held_by_breaker(row: Circuit) -> int:
    """The jobs a breaker not closed holds: its task's ready jobs, due or parked at its end, but its probe."""
    if row.state == CircuitState.CLOSED:
        return 0
    return (
        Job.objects.filter(status=JobStatus.READY, task_name=row.task_name, run_at__lte=_breaker_end(row))
        .exclude(pk=row.probe_job_id or 0)
        .count()
    )


def _breaker_end(row: Circuit) -> Any:
    """Held by the breaker: due now, or parked at its end."""
    return Now() if row.open_until is None or row.state == CircuitState.HALF_OPEN else row.open_until


def _target(row: Pause) -> tuple[str, str]:
    return ("queue", row.queue_name) if row.queue_name is not None else ("task", str(row.task_name))


def why_held(job: Job) -> str:
    """What holds ``job`` now, in words, or "" when nothing does."""
    if not Job.objects.held().filter(pk=job.pk).exists():
        return ""
    pause = (
        Pause.objects.filter(PAUSE_IN_FORCE)
        .filter(Q(queue_name=job.queue_name) | Q(task_name=job.task_name))
        .first()
    )
    if pause is not None:
        why = f" ({pause.reason})" if pause.reason else ""
        until = f" until {pause.until.isoformat(timespec='seconds')}" if pause.until else " until resumed"
        return f"{pause} paused by {pause.paused_by}{why}{until}"
    breaker = Circuit.objects.filter(task_name=job.task_name).first()
    if breaker is None or breaker.state == CircuitState.CLOSED:
        return ""
    if breaker.state == CircuitState.HALF_OPEN:
        return f"circuit of its task half-open: probe job {breaker.probe_job_id} runs first"
    until = breaker.open_until.isoformat(timespec="seconds") if breaker.open_until else "?"
    return f"circuit of its task open until {until} ({breaker.reason})"
