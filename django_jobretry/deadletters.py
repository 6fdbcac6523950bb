"""Public dead-letter API: ``from django_jobretry import deadletters``.

See services/deadletters.py; this module is the stable import path.
"""

from django_jobretry.services.deadletters import (
    BulkResult,
    NotDead,
    Page,
    RequeueConflict,
    discard,
    discard_many,
    filtered,
    list_dead,
    page_of,
    requeue,
    requeue_many,
)

__all__ = [
    "BulkResult",
    "NotDead",
    "Page",
    "RequeueConflict",
    "discard",
    "discard_many",
    "filtered",
    "list_dead",
    "page_of",
    "requeue",
    "requeue_many",
]
