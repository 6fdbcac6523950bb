"""Operator cancel: a ready job becomes a "cancelled" dead letter at once; a running one is asked to stop.

A ready job is buried in the same statement that checks it is still ready,
under the row lock, so it never starts once the cancel is committed. A
running job belongs to its worker: the cancel only records who asked and
when, and the worker sees the request with its next heartbeat, ends the
attempt as "cancelled" (fenced like any outcome) and stops the handler:
kills its process in the process pool, abandons its thread in the thread
pool (docs/worker.md#cancelling-jobs). Either way the job ends as a dead
letter with reason ``cancelled`` that can be requeued like any other.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction

from django_jobretry import signals
from django_jobretry.conf import jobretry_settings
from django_jobretry.models import DeadReason, Job
from django_jobretry.policy import ErrorKind
from django_jobretry.services import transitions
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.history import AttemptEnd, attempt_entry, recorded_actor
from django_jobretry.services.job_lines import log_extra, send_job_signal
from django_jobretry.services.sql import (
    DEAD,
    DEAD_COLUMNS,
    JOB,
    dead_letter_select,
    event_entry_sql,
    trimmed,
)

logger = logging.getLogger("django_jobretry")


@dataclass
class CancelResult:
    """What a cancel did: buried at once, asked to stop, or already finished, dead or unknown."""

    dead_letters: dict[int, int] = field(default_factory=dict)  # job id -> dead letter id
    stopping: list[int] = field(default_factory=list)
    not_live: list[int] = field(default_factory=list)


def cancel_jobs(ids: Iterable[int], *, actor: str) -> CancelResult:
    """Cancel each job of ``ids``; nothing that already finished or died is touched."""
    wanted = sorted({int(i) for i in ids})
    actor = recorded_actor(actor)
    result = CancelResult()
    with transaction.atomic(), connection.cursor() as cursor:
        # Lock in id order: two cancels of overlapping sets cannot deadlock.
        cursor.execute(f"SELECT id, status FROM {JOB} WHERE id = ANY(%s) ORDER BY id FOR UPDATE", [wanted])
        status = dict(cursor.fetchall())
        ready = [i for i in wanted if status.get(i) == "ready"]
        running = [i for i in wanted if status.get(i) == "running"]
        result.not_live = [i for i in wanted if i not in ready and i not in running]
        result.dead_letters = _bury_ready(cursor, ready, actor)
        if running:
            cursor.execute(
                f"UPDATE {JOB} SET cancel_requested_by = %s, "
                "cancel_requested_at = COALESCE(cancel_requested_at, statement_timestamp()) "
                "WHERE id = ANY(%s) AND status = 'running'",
                [actor, running],
            )
            result.stopping = running
    for job_id, dead_id in result.dead_letters.items():
        extra = {"job_id": job_id, "dead_letter_id": dead_id, "outcome": "cancelled", "actor": actor}
        logger.warning("job %s cancelled by %s; dead letter %s", job_id, actor, dead_id, extra=extra)
        signals.send(
            signals.job_dead_lettered,
            Job,
            extra,
            job_id=job_id,
            reason=DeadReason.CANCELLED.value,
            dead_letter_id=dead_id,
        )
    for job_id in result.stopping:
        extra = {"job_id": job_id, "outcome": "cancel_requested", "actor": actor}
        logger.info("job %s is running: %s asked its worker to stop it", job_id, actor, extra=extra)
    return result


def _bury_ready(cursor: Any, ids: list[int], actor: str) -> dict[int, int]:
    if not ids:
        return {}
    cancelled = {"kind": ErrorKind.FATAL.value, "ended": AttemptEnd.CANCELLED.value}
    entry = event_entry_sql("j", message="%(message)s::text", worker="''", **cancelled)
    errors = trimmed(f"(j.errors || jsonb_build_array({entry}))", "%(history)s")
    values = dead_letter_select(
        "gone",
        errors="gone.final_errors",
        reason=f"'{DeadReason.CANCELLED.value}'",
        error_class="''",
        message="%(message)s",
    )
    cursor.execute(
        f"""
        WITH gone AS (
            DELETE FROM {JOB} AS j WHERE j.id = ANY(%(ids)s) AND j.status = 'ready'
            RETURNING j.*, {errors} AS final_errors
        )
        INSERT INTO {DEAD} ({DEAD_COLUMNS}) SELECT {values} FROM gone
        RETURNING job_id, id
        """,
        {"ids": ids, "message": f"cancelled by {actor}", "history": jobretry_settings.error_history_limit},
    )
    return dict(cursor.fetchall())


def bury_cancelled_attempt(job: ClaimedJob, actor: str, *, worker_id: str, sender: type) -> int | None:
    """End the running attempt of ``job`` as "cancelled" (fenced); returns the dead letter id, or None."""
    entry = attempt_entry(
        job.attempt, AttemptEnd.CANCELLED, ErrorKind.FATAL, worker_id, message=f"cancelled by {actor}"
    )
    dead_id = transitions.bury(job, entry, DeadReason.CANCELLED, jobretry_settings.error_history_limit)
    if dead_id is None:
        return None  # the lease was lost meanwhile: whoever holds the job now decides
    extra = log_extra(job, "cancelled", dead_letter_id=dead_id, actor=actor)
    logger.warning(
        "job %s attempt %s cancelled by %s while running; dead letter %s",
        job.id,
        job.attempt,
        actor,
        dead_id,
        extra=extra,
    )
    send_job_signal(
        sender, signals.job_dead_lettered, job, reason=DeadReason.CANCELLED.value, dead_letter_id=dead_id
    )
    return dead_id
