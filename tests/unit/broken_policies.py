"""Deliberately broken policies: each property must reject at least one of them.

They are the negative controls of tests/unit/test_policy_properties.py: if a
property passes against its broken policy, it is not testing anything.
"""

from __future__ import annotations

from datetime import timedelta

from django_jobretry.policy import ErrorKind, GiveUp, GiveUpReason, Retry, RetryPolicy
from django_jobretry.policy.decisions import Decision


class UncappedPolicy(RetryPolicy):
    """Forgets max_delay: base_delay * multiplier^(a-1) grows without bound."""

    __slots__ = ()

    def _nominal_seconds(self, attempt: int) -> float:
        try:
            return self.base_delay.total_seconds() * self.multiplier ** (attempt - 1)
        except OverflowError:
            return 365 * 86_400.0


class OffByOnePolicy(RetryPolicy):
    """Gives up only after max_attempts is exceeded: one attempt too many."""

    __slots__ = ()

    def decide(
        self,
        attempt: int,
        kind: ErrorKind,
        sample: float,
        *,
        elapsed: timedelta | None = None,
        requested_delay: timedelta | None = None,
        max_attempts: int | None = None,
    ) -> Decision:
        if kind is ErrorKind.FATAL:
            return GiveUp(GiveUpReason.FATAL)
        if attempt > self.max_attempts:
            return GiveUp(GiveUpReason.EXHAUSTED)
        return Retry(self.backoff_delay(attempt, sample))


class WeakBudgetPolicy(RetryPolicy):
    """Checks the budget against the jitter-free schedule instead of the worst case."""

    __slots__ = ()

    def worst_case_total(self) -> timedelta:
        return sum((self.nominal(a) for a in range(1, self.max_attempts)), timedelta(0))


class JitterIgnoredInBoundsPolicy(RetryPolicy):
    """Applies the jitter twice, so delays leave the [1-j, 1+j] band."""

    __slots__ = ()

    def backoff_delay(self, attempt: int, sample: float) -> timedelta:
        factor = (1 + self.jitter * (2 * sample - 1)) ** 2
        return timedelta(seconds=self._nominal_seconds(attempt) * factor)


class ShrinkingPolicy(RetryPolicy):
    """Delays that drop back to base_delay once the cap is reached."""

    __slots__ = ()

    def _nominal_seconds(self, attempt: int) -> float:
        seconds = super()._nominal_seconds(attempt)
        return self.base_delay.total_seconds() if seconds >= self.max_delay.total_seconds() else seconds
