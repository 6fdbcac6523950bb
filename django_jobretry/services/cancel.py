"""Operator cancel: a ready job becomes a "cancelled" dead letter at once; a running one is asked to stop.

A ready job is buried in the same statement that checks it is still ready,
under the row lock, so it never starts once the cancel is committed. A
running job belongs to its worker: the cancel only records who asked and
when, and the worker sees the request with its next heartbeat, ends the
attempt as "cancelled" (fenced like any outcome) and stops the handler:
kills its process in the process pool, abandons its thread in the thread
pool (docs/worker.md#cancelling-jobs). Either way the job ends as a dead
letter with reason ``cancelled`` that can be requeued like any other.

The request stays on the row until the attempt ends, and every way out of
"running" but success honours it: a retry statement refuses a job whose
cancel was requested, and :func:`bury_cancel_requested` buries it instead
(its attempt's own entry kept); lease recovery buries it too
(services/recovery.py). So a cancelled job never starts again, whichever of
the cancel and the attempt's end commits first.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction

from django_jobretry import signals
from django_jobretry.conf import jobretry_settings
from django_jobretry.models import DeadReason, Job
from django_jobretry.policy import ErrorKind
from django_jobretry.services import transitions
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.history import AttemptEnd, AttemptEntry, attempt_entry, recorded_actor
from django_jobretry.services.job_lines import log_extra, send_job_signal
from django_jobretry.services.sql import (
    DEAD,
    DEAD_COLUMNS,
    DIED,
    FENCE,
    JOB,
    counting_deaths,
    dead_letter_select,
    event_entry_sql,
    stamped,
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


def _burial_sql(*, using: str, where: str, entry: str, message: str) -> str:
    """Jobs of ``where`` into the dead letters as "cancelled", ``entry`` last in their history.

    Returns (job id, dead letter id, who asked for the cancel) per job buried.
    """
    errors = trimmed(f"(j.errors || jsonb_build_array({entry}))", "%(history)s")
    values = dead_letter_select(
        "gone",
        errors="gone.final_errors",
        reason=f"'{DeadReason.CANCELLED.value}'",
        error_class="''",
        message=message,
    )
    return f"""
        WITH gone AS (
            DELETE FROM {JOB} AS j {using} WHERE {where}
            RETURNING j.*, {errors} AS final_errors
        ), dead AS (
            INSERT INTO {DEAD} ({DEAD_COLUMNS}) SELECT {values} FROM gone
            RETURNING job_id, id, {DIED}
        ), {counting_deaths("dead")}
        SELECT dead.job_id, dead.id, gone.cancel_requested_by FROM dead JOIN gone ON gone.id = dead.job_id
    """


def _bury_ready(cursor: Any, ids: list[int], actor: str) -> dict[int, int]:
    if not ids:
        return {}
    cancelled = {"kind": ErrorKind.FATAL.value, "ended": AttemptEnd.CANCELLED.value}
    entry = event_entry_sql("j", message="%(message)s::text", worker="''", **cancelled)
    sql = _burial_sql(
        using="", where="j.id = ANY(%(ids)s) AND j.status = 'ready'", entry=entry, message="%(message)s"
    )
    cursor.execute(
        sql,
        {"ids": ids, "message": f"cancelled by {actor}", "history": jobretry_settings.error_history_limit},
    )
    return {job_id: dead_id for job_id, dead_id, _ in cursor.fetchall()}


#: The attempts of a retry that its statement refused, as ``bury_cancel_requested`` binds them.
_REFUSED_RETRIES = (
    "USING unnest(%(ids)s::bigint[], %(attempts)s::int[], %(tokens)s::uuid[], %(entries)s::jsonb[]) "
    "AS d(id, attempts, token, entry)"
)


def bury_cancel_requested(
    failed: Sequence[tuple[ClaimedJob, AttemptEntry]], history_limit: int
) -> dict[int, tuple[int, str]]:
    """Bury, fenced, those of the ``failed`` attempts whose job an operator asked to cancel.

    For the retries a retry statement refused (it never makes such a job
    ready again): each (attempt, its history entry) whose lease is still held
    and whose cancel was requested becomes a "cancelled" dead letter, its
    entry kept without the retry's delay. Returns job id -> (dead letter id,
    who asked); an attempt missing from it lost its lease (a stale outcome).
    """
    if not failed:
        return {}
    sql = _burial_sql(
        using=_REFUSED_RETRIES,
        where=f"j.id = d.id AND {FENCE} AND j.cancel_requested_at IS NOT NULL",
        entry=stamped("(d.entry - 'delay')"),
        message="'cancelled by ' || gone.cancel_requested_by",
    )
    params: dict[str, Any] = {
        **transitions.fence_arrays([job for job, _ in failed]),
        "entries": [json.dumps(entry) for _, entry in failed],
        "history": history_limit,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {job_id: (dead_id, actor) for job_id, dead_id, actor in cursor.fetchall()}


def bury_cancelled_attempt(job: ClaimedJob, actor: str, *, worker_id: str, sender: type) -> int | None:
    """End the running attempt of ``job`` as "cancelled" (fenced); returns the dead letter id, or None."""
    entry = attempt_entry(
        job.attempt, AttemptEnd.CANCELLED, ErrorKind.FATAL, worker_id, message=f"cancelled by {actor}"
    )
    dead_id = transitions.bury(job, entry, DeadReason.CANCELLED, jobretry_settings.error_history_limit)
    if dead_id is None:
        return None  # the lease was lost meanwhile: whoever holds the job now decides
    announce_cancelled(job, actor, dead_id, sender, "while running")
    return dead_id


def announce_cancelled(job: ClaimedJob, actor: str, dead_id: int, sender: type, how: str) -> None:
    """Log and signal that the attempt of ``job`` ended as a "cancelled" dead letter; ``how`` says when."""
    extra = log_extra(job, "cancelled", dead_letter_id=dead_id, actor=actor)
    logger.warning(
        "job %s attempt %s cancelled by %s %s; dead letter %s",
        job.id,
        job.attempt,
        actor,
        how,
        dead_id,
        extra=extra,
    )
    send_job_signal(
        sender, signals.job_dead_lettered, job, reason=DeadReason.CANCELLED.value, dead_letter_id=dead_id
    )
