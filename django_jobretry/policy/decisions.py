"""Decisions are values: what to do after a failed attempt.

The worker never branches on exceptions directly; it asks the policy and acts
on the returned value, which keeps the decision pure and property-testable.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import timedelta


class ErrorKind(enum.StrEnum):
    """How a failure is classified: worth retrying later, or never."""

    RETRYABLE = "retryable"
    FATAL = "fatal"


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
