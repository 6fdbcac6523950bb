"""The worker's side of limits: after the ordinary claim, the limited one, while limits are declared.

With no limit declared anywhere (limits/declare.claim_limits is None) a worker
runs no extra statement and its ordinary claim has no lane filter: a
capability not declared costs nothing. Otherwise the ordinary claim leaves
jobs with a lane alone and this one takes them (services/limit_sql.py).
When a rate held a job back, the loop is told when its next token comes,
so it claims again then rather than a whole poll interval later.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from typing import Any

from django_jobretry.limits.declare import claim_limits
from django_jobretry.services import transitions
from django_jobretry.services.claimed import ClaimedJob


class LimitedClaims:
    """Claims limited jobs for one worker; ``claim_times`` is the loop's heap of monotonic claim times."""

    def __init__(
        self, owner: str, lease_seconds: float, queues: Sequence[str] | None, claim_times: list[float]
    ) -> None:
        self.owner, self.lease_seconds, self.queues = owner, lease_seconds, queues
        self.claim_times = claim_times
        self.limits: dict[str, Any] | None = claim_limits()

    @property
    def declared(self) -> bool:
        return self.limits is not None

    def claim(self, free: int) -> list[ClaimedJob]:
        """Up to ``free`` limited jobs (none when no limit is declared)."""
        if self.limits is None or free <= 0:
            return []
        jobs, wait = transitions.claim_limited(self.owner, free, self.lease_seconds, self.queues, self.limits)
        if wait is not None:
            heapq.heappush(self.claim_times, time.monotonic() + wait)
        return jobs
