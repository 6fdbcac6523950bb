"""django-jobretry: PostgreSQL-backed jobs with retry policies and dead letters.

Only the pure policy layer is imported here, so ``import django_jobretry``
works before Django settings are configured and has no side effects.
"""

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from django_jobretry.policy import (
    CircuitBreaker,
    CircuitOpen,
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
    Snooze,
)

if TYPE_CHECKING:
    from django_jobretry.context import current_job
    from django_jobretry.decorators import job
    from django_jobretry.exceptions import (
        InvalidJob,
        InvalidProgress,
        JobConflict,
        NoResult,
        NotDead,
        ResultNotReady,
        UnknownPolicy,
    )
    from django_jobretry.jobs.progress import aprogress, progress
    from django_jobretry.models.job_results import job_result

#: Names that need Django, imported on first access so importing the package stays pure.
_LAZY = {
    "job": "django_jobretry.decorators",
    "current_job": "django_jobretry.context",
    "job_result": "django_jobretry.models.job_results",
    "progress": "django_jobretry.jobs.progress",
    "aprogress": "django_jobretry.jobs.progress",
    "InvalidJob": "django_jobretry.exceptions",
    "InvalidProgress": "django_jobretry.exceptions",
    "JobConflict": "django_jobretry.exceptions",
    "NoResult": "django_jobretry.exceptions",
    "NotDead": "django_jobretry.exceptions",
    "ResultNotReady": "django_jobretry.exceptions",
    "UnknownPolicy": "django_jobretry.exceptions",
}


def __getattr__(name: str) -> object:
    """Lazy access to the Django-dependent API, so importing the package stays pure."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'django_jobretry' has no attribute {name!r}")


try:
    __version__ = version("django-jobretry")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "CircuitBreaker",
    "CircuitOpen",
    "Decision",
    "ErrorKind",
    "FatalError",
    "GiveUp",
    "GiveUpReason",
    "InvalidJob",
    "InvalidPolicy",
    "InvalidProgress",
    "JobConflict",
    "JobRetryError",
    "NoResult",
    "NotDead",
    "ResultNotReady",
    "Retry",
    "RetryPolicy",
    "RetryableError",
    "Snooze",
    "UnknownPolicy",
    "__version__",
    "aprogress",
    "current_job",
    "job",
    "job_result",
    "progress",
]
