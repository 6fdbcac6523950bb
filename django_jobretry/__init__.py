"""django-jobretry: PostgreSQL-backed jobs with retry policies and dead letters.

Only the pure policy layer is imported here, so ``import django_jobretry``
works before Django settings are configured and has no side effects.
"""

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

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
from django_jobretry.validation import InvalidJob

if TYPE_CHECKING:
    from django_jobretry.context import current_job
    from django_jobretry.decorators import job
    from django_jobretry.exceptions import UnknownPolicy
    from django_jobretry.services.deadletters import NotDead


def __getattr__(name: str) -> object:
    """Lazy access to the Django-dependent API, so importing the package stays pure."""
    if name == "job":
        from django_jobretry.decorators import job

        return job
    if name == "UnknownPolicy":
        from django_jobretry.exceptions import UnknownPolicy

        return UnknownPolicy
    if name == "NotDead":
        from django_jobretry.services.deadletters import NotDead

        return NotDead
    if name == "current_job":
        from django_jobretry.context import current_job

        return current_job
    raise AttributeError(f"module 'django_jobretry' has no attribute {name!r}")


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
    "InvalidJob",
    "InvalidPolicy",
    "JobRetryError",
    "NotDead",
    "Retry",
    "RetryPolicy",
    "RetryableError",
    "UnknownPolicy",
    "__version__",
    "current_job",
    "job",
]
