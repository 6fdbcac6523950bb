"""The retry policy: bounded, jittered exponential backoff as a pure value.

Everything here is deterministic. The caller passes the jitter sample, so the
worker draws it at random while tests choose it; no clock, no randomness and
no Django are consulted, which is what makes the invariants of
docs/design.md#invariant-1 to #invariant-5 testable.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from django_jobretry.policy.circuit import CircuitBreaker, circuit_value
from django_jobretry.policy.decisions import (
    Classification,
    Decision,
    Defer,
    ErrorKind,
    GiveUp,
    GiveUpReason,
    Retry,
    attempt_limit,
    check_attempt,
    error_classes,
    error_kind,
    number,
    requeue_budget_value,
    snooze_budget,
)
from django_jobretry.policy.errors import (
    MAX_BUDGET,
    FatalError,
    InvalidPolicy,
    RetryableError,
    requested_delay,
    to_seconds,
    to_timedelta,
)

type Seconds = int | float | timedelta
type ErrorClasses = Sequence[type[BaseException]]


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """One retry of the worst-case schedule, for display and budget checks."""

    attempt: int
    nominal: timedelta
    shortest: timedelta
    longest: timedelta
    cumulative_longest: timedelta


class RetryPolicy:
    """How often and how long to retry a failing job before it is dead.

    Two fields are for the jobs that share a policy, not for :meth:`decide`:
    ``timeout`` (how long one attempt may run) and ``keep_result`` (whether
    what a job returns is stored, for ``job.result()``); a job's own
    ``@job(timeout=..., keep_result=...)`` wins (registry.py).

    Immutable and validated at construction: a bad value raises
    :class:`InvalidPolicy` naming the field. Durations are accepted as seconds
    or ``timedelta`` and stored as ``timedelta``.
    """

    _PARAMS = (
        "max_attempts",
        "base_delay",
        "multiplier",
        "max_delay",
        "jitter",
        "total_budget",
        "retry_for",
        "fatal_errors",
        "retryable_errors",
        "unknown_errors",
        "requeue_budget",
        "timeout",
        "circuit",
        "max_snoozes",
        "snooze_for",
        "keep_result",
    )
    __slots__ = (*_PARAMS, "_base_seconds", "_max_seconds", "_uncapped_retries")

    max_attempts: int
    base_delay: timedelta
    multiplier: float
    max_delay: timedelta
    jitter: float
    total_budget: timedelta | None
    retry_for: timedelta | None
    fatal_errors: tuple[type[BaseException], ...]
    retryable_errors: tuple[type[BaseException], ...]
    unknown_errors: ErrorKind
    requeue_budget: int
    timeout: timedelta | None
    circuit: CircuitBreaker | None
    max_snoozes: int
    snooze_for: timedelta | None
    keep_result: bool
    _base_seconds: float
    _max_seconds: float
    _uncapped_retries: int

    def __init__(
        self,
        *,
        max_attempts: int = 20,
        base_delay: Seconds = 15,
        multiplier: float = 2.0,
        max_delay: Seconds = 7200,
        jitter: float = 0.25,
        total_budget: Seconds | None = None,
        retry_for: Seconds | None = None,
        fatal_errors: ErrorClasses = (),
        retryable_errors: ErrorClasses = (),
        unknown_errors: ErrorKind | str = ErrorKind.RETRYABLE,
        requeue_budget: int = 0,
        timeout: Seconds | None = None,
        circuit: CircuitBreaker | Mapping[str, object] | None = None,
        max_snoozes: int | None = None,
        snooze_for: Seconds | None = None,
        keep_result: bool = False,
    ) -> None:
        set_ = super().__setattr__
        set_("max_attempts", attempt_limit(max_attempts))
        set_("_base_seconds", to_seconds("base_delay", base_delay))
        set_("_max_seconds", to_seconds("max_delay", max_delay))
        set_("base_delay", timedelta(seconds=self._base_seconds))
        set_("max_delay", timedelta(seconds=self._max_seconds))
        set_("multiplier", number("multiplier", multiplier, "a finite number >= 1.0", lambda v: v >= 1.0))
        set_("jitter", number("jitter", jitter, "a fraction in [0, 1]", lambda v: 0 <= v <= 1))
        if self._max_seconds < self._base_seconds:
            raise InvalidPolicy("max_delay", max_delay, f"must be >= base_delay ({self._base_seconds:g} s)")
        set_(
            "retry_for",
            None if retry_for is None else to_timedelta("retry_for", retry_for, maximum=MAX_BUDGET),
        )
        set_("fatal_errors", error_classes("fatal_errors", fatal_errors))
        set_("retryable_errors", error_classes("retryable_errors", retryable_errors))
        set_("unknown_errors", error_kind("unknown_errors", unknown_errors))
        set_("requeue_budget", requeue_budget_value(requeue_budget))
        set_("timeout", None if timeout is None else to_timedelta("timeout", timeout))
        set_("circuit", circuit_value(circuit))
        count, time = snooze_budget(max_snoozes, snooze_for)
        set_("max_snoozes", count)
        set_("snooze_for", time)
        if not isinstance(keep_result, bool):  # a job's result is kept or not: no truthy strings
            raise InvalidPolicy("keep_result", keep_result, "True or False")
        set_("keep_result", keep_result)
        set_("_uncapped_retries", self._count_uncapped_retries())
        set_("total_budget", None)
        if total_budget is not None:
            budget = to_timedelta("total_budget", total_budget, maximum=MAX_BUDGET)
            worst, retries = self.worst_case_total(), self.max_attempts - 1
            retries_text = f"{retries} retry" if retries == 1 else f"{retries} retries"
            if worst > budget:
                raise InvalidPolicy(
                    "total_budget",
                    total_budget,
                    f"the worst-case schedule ({retries_text} at full jitter) "
                    f"totals {worst.total_seconds():g} s; raise total_budget or lower max_attempts/max_delay",
                )
            set_("total_budget", budget)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"RetryPolicy is immutable; cannot set {name!r}")

    def _params(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._PARAMS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RetryPolicy) and self._params() == other._params()

    def __hash__(self) -> int:
        return hash(self._params())

    def __repr__(self) -> str:
        shown = (f"{n}={getattr(self, n)!r}" for n in self._PARAMS)
        return f"RetryPolicy({', '.join(shown)})"

    def _count_uncapped_retries(self) -> int:
        """How many leading retries have a nominal delay below max_delay."""
        base, cap = self._base_seconds, self._max_seconds
        if self.multiplier == 1.0 or base >= cap:
            return 1 if base < cap else 0
        # Smallest e with base * multiplier**e >= cap, plus one to absorb log
        # rounding; harmless because _nominal_seconds() clamps with min().
        return math.ceil(math.log(cap / base) / math.log(self.multiplier)) + 1

    def _nominal_seconds(self, attempt: int) -> float:
        check_attempt(attempt)
        base, cap = self._base_seconds, self._max_seconds
        exponent = attempt - 1
        # Compare in log space first so no power is ever computed past the
        # cap: attempt 10**6 with multiplier 10 cannot overflow.
        if exponent and exponent * math.log(self.multiplier) >= math.log(cap / base):
            return cap
        return min(base * self.multiplier**exponent, cap)

    def nominal(self, attempt: int) -> timedelta:
        """Delay before the retry that follows failed ``attempt``, without jitter."""
        return timedelta(seconds=self._nominal_seconds(attempt))

    def backoff_delay(self, attempt: int, sample: float) -> timedelta:
        """nominal(attempt) * (1 + jitter * (2 * sample - 1)); sample 0.5 means no jitter."""
        if isinstance(sample, bool) or not isinstance(sample, int | float) or not 0 <= sample <= 1:
            raise InvalidPolicy("sample", sample, "a jitter sample in [0, 1]")
        return self._jittered(attempt, 1 + self.jitter * (2 * sample - 1))

    def bounds(self, attempt: int) -> tuple[timedelta, timedelta]:
        """Shortest and longest delay the jitter can produce after ``attempt``."""
        return self._jittered(attempt, 1 - self.jitter), self._jittered(attempt, 1 + self.jitter)

    def _jittered(self, attempt: int, factor: float) -> timedelta:
        # Computed in float seconds and rounded once, so the rounding is
        # monotone and bounds() brackets every backoff_delay() exactly.
        return timedelta(seconds=self._nominal_seconds(attempt) * factor)

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
        """Retry or give up after failed ``attempt`` (numbered from 1).

        ``elapsed`` is the time since the first attempt started, for
        ``retry_for``; ``requested_delay`` replaces the backoff for this retry
        (a handler's ``RetryableError(delay=...)``); ``max_attempts`` is the
        limit frozen on a job at enqueue, which wins over a policy edited since.
        """
        check_attempt(attempt)
        limit = self.max_attempts if max_attempts is None else attempt_limit(max_attempts)
        if not isinstance(kind, ErrorKind):
            raise InvalidPolicy("kind", kind, f"an ErrorKind: one of {[k.value for k in ErrorKind]}")
        if elapsed is not None and (not isinstance(elapsed, timedelta) or elapsed < timedelta(0)):
            raise InvalidPolicy(
                "elapsed", elapsed, "a timedelta >= 0 (time since the first attempt), or None"
            )
        if kind is ErrorKind.FATAL:
            return GiveUp(GiveUpReason.FATAL)
        if attempt >= limit:
            return GiveUp(GiveUpReason.EXHAUSTED)
        if requested_delay is None:
            delay = self.backoff_delay(attempt, sample)
        else:
            delay = to_timedelta("requested_delay", requested_delay, allow_zero=True)
        if self.retry_for is not None and elapsed is not None and elapsed + delay > self.retry_for:
            return GiveUp(GiveUpReason.DEADLINE)
        return Retry(delay)

    def defer(self, snoozes: int, delay: timedelta, snoozed: timedelta = timedelta(0)) -> Defer | GiveUp:
        """Run again after ``delay`` without spending an attempt, unless the snooze budget is spent:
        ``snoozes`` reached ``max_snoozes``, or ``snoozed`` (the delays so far) plus ``delay`` is past
        ``snooze_for``."""
        if snoozes >= self.max_snoozes or (self.snooze_for is not None and snoozed + delay > self.snooze_for):
            return GiveUp(GiveUpReason.SNOOZE_BUDGET)
        return Defer(delay)

    def classify(self, error: BaseException, *, name: str | None = None) -> Classification:
        """Kind of ``error``: explicit raises first, then the most specific listed class.

        ``name`` is the policy's name, only for the words of a fatal verdict's rule.
        """
        policy = "the policy" if name is None else f"policy {name!r}"
        raised = type(error).__qualname__
        if isinstance(error, FatalError):
            kind = "" if type(error) is FatalError else " (a FatalError)"
            return Classification(ErrorKind.FATAL, rule=f"{raised}{kind} raised by the job")
        if isinstance(error, RetryableError):
            return Classification(ErrorKind.RETRYABLE, requested_delay(error))
        # Walk the MRO so a subclass listed as retryable wins over a listed base
        # class that is fatal (and vice versa), whatever the list order.
        for klass in type(error).__mro__:
            if klass in self.fatal_errors:
                subclass = f"{raised} is a subclass of {klass.__qualname__}, which"
                listed = raised if klass is type(error) else subclass
                return Classification(ErrorKind.FATAL, rule=f"{listed} is in the fatal_errors of {policy}")
            if klass in self.retryable_errors:
                return Classification(ErrorKind.RETRYABLE)
        if self.unknown_errors is ErrorKind.FATAL:
            rule = f"{raised} is in neither error list of {policy}, whose unknown_errors is 'fatal'"
            return Classification(ErrorKind.FATAL, rule=rule)
        return Classification(self.unknown_errors)

    def schedule(self) -> Iterator[ScheduleRow]:
        """The retries after attempts 1 .. max_attempts - 1, worst case accumulated."""
        total = timedelta(0)
        for attempt in range(1, self.max_attempts):
            shortest, longest = self.bounds(attempt)
            total += longest
            yield ScheduleRow(attempt, self.nominal(attempt), shortest, longest, total)

    def worst_case_total(self) -> timedelta:
        """Sum of every backoff delay at full jitter: the longest a job can stay alive."""
        retries = self.max_attempts - 1
        # Past the cap every delay is identical, so sum the growing head and
        # multiply the flat tail instead of looping up to 10**6 times.
        head = min(retries, self._uncapped_retries)
        total = sum((self.bounds(a)[1] for a in range(1, head + 1)), timedelta(0))
        if retries > head:
            total += self.bounds(head + 1)[1] * (retries - head)
        return total
