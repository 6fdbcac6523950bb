"""docs/outages.md's recipes as test jobs: a partner that answers 503 with Retry-After, or is not ready.

The partner is down while an Execution row of :data:`PARTNER_DOWN` exists
(tests/integration/holds/test_outage_recipes_processes.py flips it). Each call
records ``KEY:503`` / ``KEY:snoozed`` while down and ``KEY`` once it went
through, so a test counts real calls.
"""

from __future__ import annotations

import os

from django_jobretry import CircuitOpen, RetryPolicy, Snooze, job
from tests.jobs_app.models import Execution

#: While an Execution row of this key exists, the partner answers 503.
PARTNER_DOWN = "partner-503"
#: The partner's Retry-After, in seconds: small, so an outage of many of them stays short.
RETRY_AFTER = 0.2
#: A snooze budget of three: the outage tests outlast it many times over.
BUDGETED = RetryPolicy(max_attempts=3, max_snoozes=3, base_delay=0.05, max_delay=0.05, jitter=0)
#: Snooze for a minute in all, and no count: the outage tests snooze far more than the default 20.
TIMED = RetryPolicy(max_attempts=3, snooze_for=60, base_delay=0.05, max_delay=0.05, jitter=0)


def _down(key: str, what: str) -> bool:
    down = Execution.objects.filter(key=PARTNER_DOWN).exists()
    Execution.objects.create(key=f"{key}:{what}" if down else key, attempt=1, pid=os.getpid())
    return down


@job(policy=BUDGETED)
def calls_with_retry_after(key: str) -> None:
    """The docs' 503 pattern: hold the whole task for the Retry-After the partner sent."""
    if _down(key, "503"):
        raise CircuitOpen(for_=RETRY_AFTER)


@job(policy=TIMED)
def snoozes_until_ready(key: str) -> None:
    """Try again a little later, without spending an attempt, for at most a minute of snoozes."""
    if _down(key, "snoozed"):
        raise Snooze(0.1)
