"""Pure retry policy: no Django import anywhere below this package.

The import boundary is tested (tests/unit/test_policy_is_pure.py) so the
policy stays usable and property-testable without a configured project.
"""

from django_jobretry.policy.circuit import CircuitBreaker
from django_jobretry.policy.decisions import (
    Classification,
    Decision,
    Defer,
    ErrorKind,
    GiveUp,
    GiveUpReason,
    Retry,
)
from django_jobretry.policy.errors import (
    CircuitOpen,
    FatalError,
    InvalidPolicy,
    JobRetryError,
    RetryableError,
    Snooze,
)
from django_jobretry.policy.retry import RetryPolicy, ScheduleRow

__all__ = [
    "CircuitBreaker",
    "CircuitOpen",
    "Classification",
    "Decision",
    "Defer",
    "ErrorKind",
    "FatalError",
    "GiveUp",
    "GiveUpReason",
    "InvalidPolicy",
    "JobRetryError",
    "Retry",
    "RetryPolicy",
    "RetryableError",
    "ScheduleRow",
    "Snooze",
]
