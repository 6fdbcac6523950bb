"""Lease recovery: a job whose worker stopped heartbeating is retried or buried by its policy.

A lost lease is a retryable failure like any other (docs/design.md#rule-4):
the policy decides, with its backoff, its ``retry_for`` deadline and the
job's attempt limit, and the lost attempt (counted at claim) is recorded as
``lease_expired``. One transaction: the first statement locks the expired
leases with SKIP LOCKED, re-checking the condition on each row's latest
version (a job heartbeated meanwhile is skipped, one held by another
recoverer too); then one set-based statement writes the retries and one the
dead letters, on rows this transaction still holds. A job an operator asked to
cancel (the lock reads the request too) is buried as "cancelled" instead: a
hung worker's job is never handed to another.

Operator cancel, here because lease recovery honours it too: a ready job becomes a
"cancelled" dead letter at once; a running one is asked to stop.

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
(:func:`recover_expired`). So a cancelled job never starts again, whichever of
the cancel and the attempt's end commits first.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import connection, transaction

from django_jobretry.conf import jobretry_settings
from django_jobretry.jobs import claimed, sql, statements
from django_jobretry.jobs.claimed import ClaimedJob
from django_jobretry.jobs.decisions import dead_reason, decide
from django_jobretry.jobs.events import AboutDeadJob, JobRef, announce_dead, announce_retry
from django_jobretry.jobs.history import AttemptEnd, AttemptEntry, attempt_entry, recorded_actor
from django_jobretry.jobs.sql import named_rows
from django_jobretry.models import DeadReason, Job
from django_jobretry.policy import ErrorKind, GiveUp
from django_jobretry.registry import policy_for

logger = logging.getLogger("django_jobretry")


@dataclass(frozen=True)
class Recovered:
    """A job whose lease had expired: retried after ``delay``, or buried for ``reason``."""

    id: int
    task_name: str
    queue_name: str
    attempt: int
    buried: bool
    dead_letter_id: int | None
    delay: timedelta | None = None
    reason: DeadReason | None = None
    #: Who asked to cancel the job, when that is why it was buried.
    cancelled_by: str = ""
    #: The worker that held the lease (``lease_owner``), which stopped heartbeating.
    lost_by: str = ""
    #: The flow step the job is, as its burial returned it (a retried job's is not needed).
    flow_step_id: int | None = None


def recover_expired(limit: int, history_limit: int) -> list[Recovered]:
    """Retry or bury up to ``limit`` jobs whose lease expired, as their policies decide."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.EXPIRED_LEASES, {"limit": limit})
        expired = named_rows(cursor)
        retries: dict[int, timedelta] = {}
        burials: dict[int, DeadReason] = {}
        for row in expired:
            if row["cancelled"]:
                burials[row["id"]] = DeadReason.CANCELLED
                continue
            decision = decide(
                policy_for(row["task_name"], row["policy_name"]),
                row["attempts"],
                ErrorKind.RETRYABLE,
                elapsed=row["elapsed"],
                max_attempts=row["max_attempts"],
                window=row["retry_window"],
            )
            if isinstance(decision, GiveUp):
                burials[row["id"]] = dead_reason(decision.reason, lease_lost=True)
            else:
                retries[row["id"]] = decision.delay
        _execute(cursor, statements.recovery_retry_sql(), retries, history_limit)
        buried = {
            dead["job_id"]: (dead["dead_letter_id"], dead["flow_step_id"])
            for dead in _execute(cursor, statements.recovery_burial_sql(), burials, history_limit)
        }
    recovered = []
    for row in expired:
        dead_letter_id, flow_step_id = buried.get(row["id"], (None, None))
        recovered.append(
            Recovered(
                row["id"],
                row["task_name"],
                row["queue_name"],
                row["attempts"],
                buried=row["id"] in burials,
                dead_letter_id=dead_letter_id,
                delay=retries.get(row["id"]),
                reason=burials.get(row["id"]),
                cancelled_by=row["cancel_requested_by"] if row["cancelled"] else "",
                lost_by=row["lease_owner"],
                flow_step_id=flow_step_id,
            )
        )
    return recovered


def _execute(
    cursor: Any, sql: str, values: dict[int, timedelta] | dict[int, DeadReason], history_limit: int
) -> list[dict[str, Any]]:
    """``sql`` on the locked rows of ``values`` (job id -> delay or reason); the rows it returned."""
    if not values:
        return []
    as_text = [str(v.total_seconds()) if isinstance(v, timedelta) else v.value for v in values.values()]
    cursor.execute(sql, {"ids": list(values), "values": as_text, "history": history_limit})
    return named_rows(cursor)


def announce(item: Recovered, sender: type) -> None:
    """Log and signal a lease recovery like any other retry or dead letter."""
    line = "lost its lease (worker %s); %s"
    owner = item.lost_by or "unknown"
    actor: dict[str, Any] = {"actor": item.cancelled_by} if item.cancelled_by else {}
    if item.buried and item.reason is not None and item.dead_letter_id is not None:
        then = f"dead letter {item.dead_letter_id} ({item.reason.value})"
        if item.cancelled_by:
            then = f"cancelled by {item.cancelled_by}, not retried: {then}"
        outcome = "cancelled" if item.cancelled_by else "lease_expired_dead"
        announce_dead(
            sender,
            item,
            line,
            (owner, then),
            outcome=outcome,
            reason=item.reason.value,
            dead_letter_id=item.dead_letter_id,
            lost_by=owner,
            **actor,
        )
    elif item.delay is not None:
        announce_retry(
            sender,
            item,
            line,
            (owner, f"retry in {item.delay.total_seconds():.3f}s"),
            outcome="lease_expired_retry",
            level=logging.WARNING,
            reason=AttemptEnd.LEASE_EXPIRED.value,
            delay=item.delay,
            lost_by=owner,
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
        cursor.execute(sql.LOCK_FOR_CANCEL, {"ids": wanted})
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
        job = JobRef(row["job_id"], row["task_name"], row["queue_name"], row["attempt"], row["flow_step_id"])
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
    cursor.execute(statements.cancel_burial_sql(ready=True), params)
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
        **claimed.fence_arrays([job for job, _ in failed]),
        "entries": [json.dumps(entry) for _, entry in failed],
        "history": history_limit,
    }
    with connection.cursor() as cursor:
        cursor.execute(statements.cancel_burial_sql(ready=False), params)
        rows = named_rows(cursor)
    return {row["job_id"]: (row["dead_letter_id"], row["cancelled_by"]) for row in rows}


def bury_cancelled_attempt(job: ClaimedJob, actor: str, *, worker_id: str, sender: type) -> int | None:
    """End the running attempt of ``job`` as "cancelled" (fenced); returns the dead letter id, or None."""
    entry = attempt_entry(
        job.attempt, AttemptEnd.CANCELLED, ErrorKind.FATAL, worker_id, message=f"cancelled by {actor}"
    )
    burial = claimed.bury(job, entry, DeadReason.CANCELLED, jobretry_settings.error_history_limit)
    if burial is None:
        return None  # the lease was lost meanwhile: whoever holds the job now decides
    announce_cancelled(sender, job, actor, burial.dead_letter_id, "while running")
    return burial.dead_letter_id


def announce_cancelled(sender: type, job: AboutDeadJob, actor: str, dead_id: int, how: str) -> None:
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
