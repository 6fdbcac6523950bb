"""Asking a job's policy what a failed attempt means: the worker's one source of jitter.

Used when a handler's failure is recorded and when a lost lease is
recovered, so both retry on the same schedule. The policy itself is pure
and takes the jitter sample as an argument; the sample is drawn here.
"""

from __future__ import annotations

import random
from datetime import timedelta

from django_jobretry.models import DeadReason
from django_jobretry.policy import Classification, RetryPolicy
from django_jobretry.policy.decisions import Decision, ErrorKind, GiveUp, GiveUpReason, Retry
from django_jobretry.registry import INLINE_POLICY
from django_jobretry.services.claimed import Failed
from django_jobretry.services.history import AttemptEnd

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
