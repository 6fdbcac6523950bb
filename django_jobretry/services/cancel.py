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

from django_jobretry.conf import jobretry_settings
from django_jobretry.models import DeadReason, Job
from django_jobretry.policy import ErrorKind
from django_jobretry.services import burial_sql, statements, transitions
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.history import AttemptEnd, AttemptEntry, attempt_entry, recorded_actor
from django_jobretry.services.job_lines import AboutJob, JobRef, announce_dead
from django_jobretry.services.sql import named_rows

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
        cursor.execute(statements.LOCK_FOR_CANCEL, {"ids": wanted})
        status = dict(cursor.fetchall())
        ready = [i for i in wanted if status.get(i) == "ready"]
        running = [i for i in wanted if status.get(i) == "running"]
        result.not_live = [i for i in wanted if i not in ready and i not in running]
        buried = _bury_ready(cursor, ready, actor)
        result.dead_letters = {row["job_id"]: row["dead_letter_id"] for row in buried}
        if running:
            cursor.execute(statements.REQUEST_CANCEL, {"actor": actor, "ids": running})
            result.stopping = running
    for row in buried:
        job = JobRef(row["job_id"], row["task_name"], row["queue_name"], row["attempt"])
        announce_cancelled(Job, job, actor, row["dead_letter_id"], "before it started")
    for job_id in result.stopping:
        extra = {"job_id": job_id, "outcome": "cancel_requested", "actor": actor}
        logger.info("job %s is running: %s asked its worker to stop it", job_id, actor, extra=extra)
    return result


def _bury_ready(cursor: Any, ids: list[int], actor: str) -> list[dict[str, Any]]:
    if not ids:
        return []
    params = {
        "ids": ids,
        "message": f"cancelled by {actor}",
        "history": jobretry_settings.error_history_limit,
    }
    cursor.execute(burial_sql.cancel_burial_sql(ready=True), params)
    return named_rows(cursor)


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
    params: dict[str, Any] = {
        **transitions.fence_arrays([job for job, _ in failed]),
        "entries": [json.dumps(entry) for _, entry in failed],
        "history": history_limit,
    }
    with connection.cursor() as cursor:
        cursor.execute(burial_sql.cancel_burial_sql(ready=False), params)
        rows = named_rows(cursor)
    return {row["job_id"]: (row["dead_letter_id"], row["cancelled_by"]) for row in rows}


def bury_cancelled_attempt(job: ClaimedJob, actor: str, *, worker_id: str, sender: type) -> int | None:
    """End the running attempt of ``job`` as "cancelled" (fenced); returns the dead letter id, or None."""
    entry = attempt_entry(
        job.attempt, AttemptEnd.CANCELLED, ErrorKind.FATAL, worker_id, message=f"cancelled by {actor}"
    )
    burial = transitions.bury(job, entry, DeadReason.CANCELLED, jobretry_settings.error_history_limit)
    if burial is None:
        return None  # the lease was lost meanwhile: whoever holds the job now decides
    announce_cancelled(sender, job, actor, burial.dead_letter_id, "while running")
    return burial.dead_letter_id


def announce_cancelled(sender: type, job: AboutJob, actor: str, dead_id: int, how: str) -> None:
    """The attempt of ``job`` ended as a "cancelled" dead letter; ``how`` says when."""
    announce_dead(
        sender,
        job,
        "cancelled by %s %s; dead letter %s",
        (actor, how, dead_id),
        outcome="cancelled",
        reason=DeadReason.CANCELLED.value,
        dead_letter_id=dead_id,
        actor=actor,
    )
