"""Asking a job's policy what a failed attempt means: the worker's one source of jitter.

Used when a handler's failure is recorded and when a lost lease is
recovered, so both retry on the same schedule. The policy itself is pure
and takes the jitter sample as an argument; the sample is drawn here.

Beside it, the attempts a job gave back: ``raise Snooze(delay)`` and ``raise CircuitOpen(for_=...)``.

Neither is a failure. The job is ready again after the delay with its
attempt uncounted, its history holding the snooze; the snooze budget of its
policy (``max_snoozes``, ``snooze_for``: policy/decisions.py) bounds how often
and for how long in all. Past it the job is a ``snooze_budget`` dead letter,
written by the failure path like any burial, its error saying how many
snoozes over how long and which limit. A ``CircuitOpen`` also opens its
task's breaker, in the same transaction, so no other job of the task starts
once this one is written.

A ``CircuitOpen`` raised by the breaker's probe is not counted: it is the
answer the breaker asked for on behalf of every held job, and counting it
would make a long outage kill the jobs that take turns probing it
(docs/decisions/0013-outages-outlast-the-budget.md).
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.db import connection, transaction

from django_jobretry.conf import jobretry_settings
from django_jobretry.display import count_of, humanize_delay
from django_jobretry.holds import breakers
from django_jobretry.holds import sql as hold_sql
from django_jobretry.jobs import statements
from django_jobretry.jobs.claimed import ClaimedJob, Failed, FailedAttempt
from django_jobretry.jobs.events import JOB_LINE, job_line_args, log_extra
from django_jobretry.jobs.history import (
    AttemptEnd,
    AttemptEntry,
    clean_text,
    error_entry,
    minimal_entry,
    render_error,
)
from django_jobretry.models import DeadReason
from django_jobretry.policy import CircuitOpen, Classification, Defer, ErrorKind, RetryPolicy, Snooze
from django_jobretry.policy.decisions import Decision, GiveUp, GiveUpReason, Retry
from django_jobretry.policy.errors import to_timedelta
from django_jobretry.registry import INLINE_POLICY

# A random.Random of our own: handlers reseeding the global one must not
# synchronise every worker's jitter.
_jitter = random.Random()  # noqa: S311 - jitter, not security


def decide(
    policy: RetryPolicy,
    attempt: int,
    kind: ErrorKind,
    *,
    elapsed: timedelta | None,
    max_attempts: int,
    requested_delay: timedelta | None = None,
    window: float | None = None,
) -> Decision:
    """The policy's decision for failed ``attempt``, with a fresh jitter sample.

    A retry that would not start within ``window`` seconds (its schedule's next slot) is a ``deadline``.
    """
    decision = policy.decide(
        attempt,
        kind,
        _jitter.random(),
        elapsed=elapsed,
        requested_delay=requested_delay,
        max_attempts=max_attempts,
    )
    if isinstance(decision, Retry) and window is not None and decision.delay.total_seconds() >= window:
        return GiveUp(GiveUpReason.DEADLINE)
    return decision


def classify_failure(policy: RetryPolicy, outcome: Failed) -> Classification:
    """The policy's verdict on the error; an unregistered task or a timeout is always worth retrying."""
    if outcome.classification is not None:
        return outcome.classification
    if outcome.ended in (AttemptEnd.UNKNOWN_TASK, AttemptEnd.TIMEOUT):
        return Classification(ErrorKind.RETRYABLE)
    name = outcome.job.policy_name
    try:
        return policy.classify(outcome.error, name=None if name == INLINE_POLICY else name)
    except Exception:  # the error is user code; what cannot be classified is retried
        return Classification(ErrorKind.RETRYABLE)


#: What a dead letter records for each reason a policy gives up.
DEAD_REASONS = {
    GiveUpReason.FATAL: DeadReason.FATAL,
    GiveUpReason.EXHAUSTED: DeadReason.EXHAUSTED,
    GiveUpReason.DEADLINE: DeadReason.DEADLINE,
    GiveUpReason.SNOOZE_BUDGET: DeadReason.SNOOZE_BUDGET,
}


def dead_reason(reason: GiveUpReason, *, lease_lost: bool = False) -> DeadReason:
    """The dead-letter reason of a policy's GiveUp; a lost lease's last attempt is ``lease_expired``,
    unless the ``retry_for`` deadline passed."""
    if lease_lost and reason is not GiveUpReason.DEADLINE:
        return DeadReason.LEASE_EXPIRED
    return DEAD_REASONS[reason]


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
    """The attempt of a Snooze or CircuitOpen, its entries built; decided when written (:func:`settle`)."""
    job, classification = outcome.job, outcome.classification or Classification(ErrorKind.RETRYABLE)
    rendered = outcome.rendered or render_error(outcome.error)
    entry = error_entry(job.attempt, rendered, ErrorKind.RETRYABLE, outcome.ended, worker)
    fallback = minimal_entry(job.attempt, outcome.ended, ErrorKind.RETRYABLE, worker)
    return FailedAttempt(job, policy, classification, entry, fallback)


def settle(attempt: FailedAttempt) -> FailedAttempt:
    """Decide a deferral on its locked row: again after its delay, or dead past the snooze budget.

    Call inside ``transaction.atomic()``, before :func:`write` or the burial.
    The row says what the claim did not: the time the job snoozed so far,
    and whether this attempt ran as its breaker's probe (then a CircuitOpen
    is not counted, and its entry says ``"probe": true``). Stale when the
    lease was lost.
    """
    job, delay = attempt.job, attempt.classification.requested_delay or timedelta(0)
    with connection.cursor() as cursor:
        cursor.execute(hold_sql.DEFERRING, {"id": job.id, "attempt": job.attempt, "token": job.token})
        row = cursor.fetchone()
    if row is None:
        return replace(attempt, stale=True)
    snoozed, probe = timedelta(seconds=row[0]), row[1] and attempt.entry["ended"] == AttemptEnd.CIRCUIT_OPEN
    decision = Defer(delay) if probe else attempt.policy.defer(job.snoozes, delay, snoozed)
    if isinstance(decision, Defer):
        entry: AttemptEntry = {**attempt.entry, "delay": delay.total_seconds()}
        fallback: AttemptEntry = {**attempt.fallback, "delay": delay.total_seconds()}
        if probe:
            entry["probe"] = fallback["probe"] = True
        return replace(attempt, decision=decision, entry=entry, fallback=fallback)
    verdict, rule = spent(attempt, snoozed, delay)
    said, chars = attempt.entry["message"], jobretry_settings.error_message_chars
    raised = "Snooze" if attempt.entry["ended"] == AttemptEnd.SNOOZED else "CircuitOpen"
    message = clean_text(f"{verdict}; its {raised} said: {said}" if said else verdict, chars)
    return replace(
        attempt,
        decision=decision,
        entry={**attempt.entry, "message": message, "rule": rule},
        fallback={**attempt.fallback, "message": verdict, "rule": rule},
    )


def spent(attempt: FailedAttempt, snoozed: timedelta, delay: timedelta) -> tuple[str, str]:
    """Why a deferral is past the snooze budget, for the dead letter: how many over how long, which limit."""
    policy, job = attempt.policy, attempt.job
    so_far = f"snoozed {count_of(job.snoozes, 'time')} ({humanize_delay(snoozed)} in all)"
    if job.snoozes >= policy.max_snoozes or policy.snooze_for is None:
        limit = f"max_snoozes ({policy.max_snoozes})"
        return f"{so_far}: the most its policy allows (max_snoozes {policy.max_snoozes})", _of(limit, job)
    limit = f"snooze_for ({humanize_delay(policy.snooze_for)})"
    return f"{so_far}: another {humanize_delay(delay)} is past its policy's {limit}", _of(limit, job)


def _of(limit: str, job: ClaimedJob) -> str:
    return f"{limit} of policy {job.policy_name!r}"


def write(attempt: FailedAttempt, decision: Defer, history_limit: int) -> set[int]:
    """Write a deferral (:func:`settle` decided it), fenced; a CircuitOpen's breaker opens in the same
    transaction. A probe's is not counted against the snooze budget.

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
        "counted": not attempt.entry.get("probe", False),
    }
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statements.snooze_sql(), params)
        kept = {row[0] for row in cursor.fetchall()}
        if kept and attempt.entry["ended"] == AttemptEnd.CIRCUIT_OPEN:
            breakers.hold_task(job.task_name, decision.delay, attempt.policy.circuit, job.id)
    return kept


def announce(attempt: FailedAttempt, decision: Defer) -> None:
    """The log line of a written deferral."""
    job, seconds, policy = attempt.job, decision.delay.total_seconds(), attempt.policy
    what = "snoozed" if attempt.entry["ended"] == AttemptEnd.SNOOZED else "opened its task's circuit"
    if attempt.entry.get("probe"):
        budget, snoozes = "its breaker's probe: not counted against its snooze budget", job.snoozes
    else:
        snoozes = job.snoozes + 1
        limit = f"snooze_for {humanize_delay(policy.snooze_for)}" if policy.snooze_for else ""
        budget = f"snooze {snoozes} of {policy.max_snoozes}" if not limit else f"snooze {snoozes}; {limit}"
    logger.info(
        f"{JOB_LINE} %s; its attempt given back, again in %.3fs (%s)",
        *job_line_args(job),
        what,
        seconds,
        budget,
        extra=log_extra(job, attempt.entry["ended"], delay=seconds, snoozes=snoozes),
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
