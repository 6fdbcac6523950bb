"""Helpers for the django.tasks backend tests (test_tasks_backend*.py; Django 6+ only).

States are reached with the worker's own transitions, as in tests/attempts.py:
the claim counts the attempt, the Recorder writes the history entry, the
retry, the dead letter or the success with its stored return value.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django_jobretry.backends import JobRetryBackend
from django_jobretry.jobs import claim
from django_jobretry.jobs.claimed import ClaimedJob, Succeeded
from django_jobretry.jobs.record import Recorder
from tests.attempts import LEASE, record_failure

#: Seconds a retry of the "three" policy (at most 50 ms of backoff) may take to become due.
DUE_TIMEOUT = 10.0


def claim_due(owner: str, *, lease: float = LEASE) -> ClaimedJob:
    """Claim the one job as ``owner`` once its backoff (milliseconds under "three") is over."""
    deadline = time.monotonic() + DUE_TIMEOUT
    while not (claimed := claim.claim(owner, 1, lease, None)):
        assert time.monotonic() < deadline, f"no job became due within {DUE_TIMEOUT} s"
        time.sleep(0.01)
    assert len(claimed) == 1, claimed
    return claimed[0]


def fail(owner: str, error: BaseException) -> ClaimedJob:
    """One attempt by worker ``owner`` that raised ``error``; the policy decides what follows."""
    claimed = claim_due(owner)
    record_failure(claimed, error, owner=owner)
    return claimed


def succeed(owner: str, value: Any) -> ClaimedJob:
    """One attempt by worker ``owner`` that returned ``value``, recorded as the worker records it."""
    claimed = claim_due(owner)
    Recorder(owner, JobRetryBackend).record_successes([Succeeded(claimed, json.dumps(value))])
    return claimed
