"""django-jobretry: PostgreSQL-backed jobs with retry policies and dead letters.

Only the pure policy layer is imported here, so ``import django_jobretry``
works before Django settings are configured and has no side effects.
"""

from importlib.metadata import PackageNotFoundError, version

from django_jobretry.policy import (
    Decision,
    ErrorKind,
    FatalError,
    GiveUp,
    GiveUpReason,
    InvalidPolicy,
    JobRetryError,
    Retry,
    RetryableError,
    RetryPolicy,
)

try:
    __version__ = version("django-jobretry")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "Decision",
    "ErrorKind",
    "FatalError",
    "GiveUp",
    "GiveUpReason",
    "InvalidPolicy",
    "JobRetryError",
    "Retry",
    "RetryPolicy",
    "RetryableError",
    "__version__",
]
