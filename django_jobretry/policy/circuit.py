"""The circuit breaker of a policy, as a pure value: when a task's failures hold it, and for how long.

A breaker is configured in a policy and counted per task (docs/outages.md).
Its states are closed (jobs run), open (the task's jobs are held until the
cooldown ends), half-open (one probe job runs). The window is fixed, not
sliding: it starts at the first counted failure and the count restarts once
``window`` has passed, so the store is one row per task, updated in the
transaction that records each failure. Each reopening doubles the cooldown
up to ``max_cooldown`` (:func:`next_cooldown`); a probe's success resets it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from django_jobretry.policy.decisions import ErrorKind, error_classes, number
from django_jobretry.policy.errors import InvalidPolicy, to_timedelta

#: The keys a breaker's mapping may hold, with their defaults (None: required).
CIRCUIT_FIELDS: dict[str, object] = {
    "failures": None,
    "window": 60,
    "cooldown": 30,
    "max_cooldown": 900,
    "errors": (),
    "release_per_second": 10,
}
#: Most failures a breaker may wait for: past this it is not a breaker.
MAX_THRESHOLD = 1_000_000


@dataclass(frozen=True, slots=True)
class CircuitBreaker:
    """Hold a task once ``failures`` retryable failures fall within ``window``.

    ``errors``: only failures of these classes (and subclasses) count; empty,
    every retryable failure counts. Fatal failures never do. Once a probe
    succeeds, the held jobs are released at ``release_per_second``, so the
    recovered downstream is not hit by the whole backlog at once.
    """

    failures: int
    window: timedelta
    cooldown: timedelta
    max_cooldown: timedelta
    errors: tuple[type[BaseException], ...] = ()
    release_per_second: float = 10.0

    def __post_init__(self) -> None:
        if isinstance(self.failures, bool) or not isinstance(self.failures, int):
            raise InvalidPolicy("circuit.failures", self.failures, f"an integer from 1 to {MAX_THRESHOLD}")
        if not 1 <= self.failures <= MAX_THRESHOLD:
            raise InvalidPolicy("circuit.failures", self.failures, f"an integer from 1 to {MAX_THRESHOLD}")
        if self.max_cooldown < self.cooldown:
            raise InvalidPolicy(
                "circuit.max_cooldown",
                self.max_cooldown.total_seconds(),
                f"must be >= cooldown ({self.cooldown.total_seconds():g} s)",
            )

    @classmethod
    def from_mapping(cls, value: Mapping[str, object]) -> CircuitBreaker:
        """A breaker from a policy's ``"circuit"`` mapping; InvalidPolicy names the bad key."""
        if not isinstance(value, Mapping):
            raise InvalidPolicy("circuit", value, 'a dict such as {"failures": 20, "window": 60}, or None')
        unknown = sorted(str(key) for key in value if key not in CIRCUIT_FIELDS)
        if unknown:
            raise InvalidPolicy("circuit", unknown, f"unknown key(s); allowed: {sorted(CIRCUIT_FIELDS)}")
        if "failures" not in value:
            raise InvalidPolicy("circuit", dict(value), 'needs "failures", the count that opens it')
        fields = {**CIRCUIT_FIELDS, **value}
        rate = number(
            "circuit.release_per_second",
            fields["release_per_second"],
            "a number of jobs per second > 0",
            lambda v: v > 0,
        )
        return cls(
            failures=fields["failures"],  # type: ignore[arg-type]
            window=to_timedelta("circuit.window", fields["window"]),
            cooldown=to_timedelta("circuit.cooldown", fields["cooldown"]),
            max_cooldown=to_timedelta("circuit.max_cooldown", fields["max_cooldown"]),
            errors=error_classes("circuit.errors", fields["errors"]),
            release_per_second=rate,
        )

    def counts(self, kind: ErrorKind, raised: Sequence[str]) -> bool:
        """Whether a failure of ``kind`` counts; ``raised``: the dotted names of the error's classes.

        Names, not classes: a failure in a child process comes back as its
        rendered class name only.
        """
        if kind is not ErrorKind.RETRYABLE:
            return False
        return not self.errors or any(dotted(klass) in raised for klass in self.errors)

    def release_spacing(self) -> float:
        """Seconds between two released jobs once a probe succeeded."""
        return 1.0 / self.release_per_second


def next_cooldown(current: float, cap: float) -> float:
    """The cooldown of a reopening after one of ``current`` seconds: doubled, never past ``cap``."""
    return min(current * 2, max(cap, current))


def dotted(klass: type) -> str:
    """A class's dotted name, as history entries store an error class."""
    return f"{klass.__module__}.{klass.__qualname__}"


def circuit_value(value: object) -> CircuitBreaker | None:
    """A policy's ``circuit`` parameter: None, a breaker, or its mapping."""
    if value is None or isinstance(value, CircuitBreaker):
        return value
    return CircuitBreaker.from_mapping(value)  # type: ignore[arg-type]
