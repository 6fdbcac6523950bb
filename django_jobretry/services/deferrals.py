"""Attempts a job gave back: ``raise Snooze(delay)`` and ``raise CircuitOpen(for_=...)``.

Neither is a failure. The job is ready again after the delay with its
attempt uncounted, its history holding the snooze; ``max_snoozes`` of its
policy bounds how often (past it the job is a ``snooze_budget`` dead
letter, written by the failure path like any burial). A ``CircuitOpen``
also opens its task's breaker, in the same transaction, so no other job of
the task starts once this one is written.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.db import connection, transaction

from django_jobretry.policy import CircuitOpen, Classification, Defer, ErrorKind, RetryPolicy, Snooze
from django_jobretry.policy.durations import to_timedelta
from django_jobretry.services import circuits, hold_sql
from django_jobretry.services.claimed import ClaimedJob, Failed, FailedAttempt
from django_jobretry.services.history import AttemptEnd, error_entry, minimal_entry, render_error
from django_jobretry.services.job_lines import JOB_LINE, job_line_args, log_extra

logger = logging.getLogger("django_jobretry")

#: How a failed attempt ends when it counts towards a breaker (:func:`counted`).
COUNTED = frozenset({AttemptEnd.ERROR, AttemptEnd.TIMEOUT})


def deferred(job: ClaimedJob, error: Snooze | CircuitOpen) -> Failed | None:
    """The outcome of a job that raised ``error``; None when its delay is unusable (then it is a failure).

    The delay travels as the classification's requested delay, which a child
    process sends back too. The error is the handler's object: a subclass
    that skipped ``__init__`` or holds a bad delay is treated as any error.
    """
    snoozed = isinstance(error, Snooze)
    ended = AttemptEnd.SNOOZED if snoozed else AttemptEnd.CIRCUIT_OPEN
    try:
        # As each class accepts it when raised: Snooze(0) means "again at once", a breaker needs a time.
        delay = to_timedelta("delay", getattr(error, "delay" if snoozed else "for_"), allow_zero=snoozed)
    except Exception:
        return None
    return Failed(job, error, ended, render_error(error), Classification(ErrorKind.RETRYABLE, delay))


def deferred_attempt(outcome: Failed, policy: RetryPolicy, worker: str) -> FailedAttempt:
    """The attempt of a Snooze or CircuitOpen, decided: again after its delay, or dead past the budget."""
    job, classification = outcome.job, outcome.classification or Classification(ErrorKind.RETRYABLE)
    delay = classification.requested_delay or timedelta(0)
    rendered = outcome.rendered or render_error(outcome.error)
    entry = error_entry(job.attempt, rendered, ErrorKind.RETRYABLE, outcome.ended, worker)
    fallback = minimal_entry(job.attempt, outcome.ended, ErrorKind.RETRYABLE, worker)
    decision = policy.defer(job.snoozes, delay)
    if isinstance(decision, Defer):
        seconds = delay.total_seconds()
        entry, fallback = {**entry, "delay": seconds}, {**fallback, "delay": seconds}
    return FailedAttempt(job, policy, classification, entry, fallback, decision=decision)


def write(attempt: FailedAttempt, decision: Defer, history_limit: int) -> set[int]:
    """Write a deferral, fenced; a CircuitOpen's breaker opens in the same transaction.

    Returns the ids written: empty when the lease was lost or a cancel was requested.
    """
    job = attempt.job
    params: dict[str, Any] = {
        "id": job.id,
        "attempt": job.attempt,
        "token": job.token,
        "entry": json.dumps(attempt.entry),
        "delay": decision.delay.total_seconds(),
        "history": history_limit,
    }
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(hold_sql.snooze_sql(), params)
        kept = {row[0] for row in cursor.fetchall()}
        if kept and attempt.entry["ended"] == AttemptEnd.CIRCUIT_OPEN:
            circuits.hold_task(job.task_name, decision.delay, attempt.policy.circuit, job.id)
    return kept


def announce(attempt: FailedAttempt, decision: Defer) -> None:
    """The log line of a written deferral."""
    job, seconds = attempt.job, decision.delay.total_seconds()
    what = "snoozed" if attempt.entry["ended"] == AttemptEnd.SNOOZED else "opened its task's circuit"
    logger.info(
        f"{JOB_LINE} %s; its attempt given back, again in %.3fs (snooze %d of %d)",
        *job_line_args(job),
        what,
        seconds,
        job.snoozes + 1,
        attempt.policy.max_snoozes,
        extra=log_extra(job, attempt.entry["ended"], delay=seconds, snoozes=job.snoozes + 1),
    )


def counted(attempt: FailedAttempt, error: BaseException) -> FailedAttempt:
    """``attempt``, marked when its failure counts towards its policy's breaker.

    Only what the handler raised and time limits count (a downstream that
    errors or hangs): not an unknown task during a deploy, nor a crashed
    process, nor a shutdown.
    """
    breaker = attempt.policy.circuit
    if breaker is None or attempt.entry["ended"] not in COUNTED:
        return attempt
    raised = [f"{k.__module__}.{k.__qualname__}" for k in type(error).__mro__] + [
        attempt.entry["error_class"]
    ]
    return replace(attempt, counted=breaker.counts(attempt.classification.kind, raised))
