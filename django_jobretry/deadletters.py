"""Public dead-letter API: ``from django_jobretry import deadletters``.

See services/deadletters.py; this module is the stable import path.
"""

from django_jobretry.exceptions import NotDead, RequeueConflict
from django_jobretry.services.deadletters import (
    BulkResult,
    Page,
    discard,
    discard_many,
    filtered,
    list_dead,
    page_of,
    predicted_conflicts,
    requeue,
    requeue_many,
)
from django_jobretry.services.resubmitters import Resubmitted

__all__ = [
    "BulkResult",
    "NotDead",
    "Page",
    "RequeueConflict",
    "Resubmitted",
    "discard",
    "discard_many",
    "filtered",
    "list_dead",
    "page_of",
    "predicted_conflicts",
    "requeue",
    "requeue_many",
]
