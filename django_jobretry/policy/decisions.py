"""Decisions are values: what to do after a failed attempt.

The worker never branches on exceptions directly; it asks the policy and acts
on the returned value, which keeps the decision pure and property-testable.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import timedelta


class ErrorKind(enum.StrEnum):
    """How a failure is classified: worth retrying later, or never."""

    RETRYABLE = "retryable"
    FATAL = "fatal"


@dataclass(frozen=True, slots=True)
class Classification:
    """How one exception is treated: its kind, any delay it asked for, and the rule that made it fatal."""

    kind: ErrorKind
    requested_delay: timedelta | None = None
    #: Which rule made the error fatal, for people ("ValueError is in the fatal_errors of policy
    #: 'webhooks'"); None when retryable. Not compared: it explains the kind, it is not one.
    rule: str | None = field(default=None, compare=False)


class GiveUpReason(enum.StrEnum):
    """Why a job stops being retried; stored on its dead letter."""

    FATAL = "fatal"
    EXHAUSTED = "exhausted"
    DEADLINE = "deadline"
    SNOOZE_BUDGET = "snooze_budget"


@dataclass(frozen=True, slots=True)
class Retry:
    """Run the job again after ``delay``."""

    delay: timedelta


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Stop retrying; the job becomes a dead letter for ``reason``."""

    reason: GiveUpReason


@dataclass(frozen=True, slots=True)
class Defer:
    """Run the job again after ``delay`` with its attempt given back (a Snooze or a CircuitOpen)."""

    delay: timedelta


type Decision = Retry | GiveUp | Defer
