"""Attempts made the real way, for tests that need a claimed or failed job as their starting state.

Unlike tests/factories.py, nothing here writes rows directly: a job is claimed
with the worker's own ``claim.claim`` and its failure is recorded by the
worker's own ``Recorder``, so the policy, the history entry, the retry and the
dead letter are exactly what a worker would leave behind::

    claimed = claim_one()                          # the one due job, now running
    claimed = fail_attempt(ConnectionResetError()) # claimed, failed, retry scheduled
    fail_attempt(FatalError("bad"))                # claimed, failed, buried
    dead = kill(jobs.fatal, key="k")               # enqueued, claimed, failed fatally
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from django_jobretry import FatalError
from django_jobretry.decorators import JobDefinition
from django_jobretry.jobs import claim
from django_jobretry.jobs.claimed import Failed
from django_jobretry.jobs.history import AttemptEnd
from django_jobretry.jobs.record import Recorder
from django_jobretry.models import DeadLetter
from tests.jobs_app import jobs

if TYPE_CHECKING:
    # Only for annotations: the class has lived in services.transitions and in services.claimed.
    from django_jobretry.jobs.claimed import ClaimedJob

#: The lease owner (worker id) these helpers claim and record as by default.
OWNER = "test-worker"
#: The lease, in seconds, these helpers claim with by default.
LEASE = 30


def claim_one(*, owner: str = OWNER, lease: float = LEASE, queues: Sequence[str] | None = None) -> ClaimedJob:
    """Claim the one due job (in ``queues``, or any queue); fails the test unless exactly one was claimed."""
    claimed = claim.claim(owner, 1, lease, queues)
    assert len(claimed) == 1, f"expected to claim exactly one due job, claimed {len(claimed)}"
    return claimed[0]


def record_failure(
    claimed: ClaimedJob, error: BaseException, *, owner: str = OWNER, ended: AttemptEnd = AttemptEnd.ERROR
) -> None:
    """Record that the attempt ``claimed`` raised ``error``, as worker ``owner``'s Recorder does."""
    Recorder(owner, object).record_failure(Failed(claimed, error, ended))


def fail_attempt(
    error: BaseException,
    *,
    owner: str = OWNER,
    ended: AttemptEnd = AttemptEnd.ERROR,
    lease: float = LEASE,
    queues: Sequence[str] | None = None,
) -> ClaimedJob:
    """Claim the one due job and record that its attempt raised ``error``; returns the claimed attempt.

    What happens next is the policy's decision, as in production: a retry
    (the job is ready again, later), a dead letter, or an automatic requeue.
    """
    claimed = claim_one(owner=owner, lease=lease, queues=queues)
    record_failure(claimed, error, owner=owner, ended=ended)
    return claimed


def kill(definition: JobDefinition[[str]] = jobs.fatal, key: str = "k") -> DeadLetter:
    """A dead letter made the real way: ``definition`` is enqueued with ``key`` and fails fatally."""
    definition.enqueue(key)
    claimed = fail_attempt(FatalError(f"bad {key}"))
    return DeadLetter.objects.get(job_id=claimed.id)
