"""When the main loop claims: when woken, when its poll is due, or when a retry it scheduled is.

A LISTEN notification or a finished job wakes the loop at once. Jobs that
become due later send nothing, so an idle worker finds them by polling every
POLL_SECONDS (docs/design.md#rule-9). Its own retries are the exception it
can foresee: the Recorder remembers when each comes due, and the loop claims
then, so a retry after 1 ms does not wait a whole poll interval.
"""

from __future__ import annotations

import heapq


class ClaimSchedule:
    """The loop's claim times; ``retries_due`` is the Recorder's heap of time.monotonic() values."""

    def __init__(self, poll_seconds: float, retries_due: list[float]) -> None:
        self.poll_seconds = poll_seconds
        self.retries_due = retries_due
        self.next_poll = 0.0  # claim at once on start

    def next_at(self) -> float:
        """The monotonic time of the next claim, unless something wakes the loop first."""
        return min(self.next_poll, self.retries_due[0]) if self.retries_due else self.next_poll

    def due(self, now: float) -> bool:
        return now >= self.next_at()

    def claimed(self, started: float) -> None:
        """A claim ran at ``started``: poll again in POLL_SECONDS; the retries due by then were claimable."""
        self.next_poll = started + self.poll_seconds
        while self.retries_due and self.retries_due[0] <= started:
            heapq.heappop(self.retries_due)
