"""Public dead-letter API: ``from django_jobretry import deadletters``.

The dead-letter capability in one folder. Its service modules are the
services layer (docs/design.md#layers): ``service`` (list, requeue, discard),
``chunks`` (one chunk of a bulk action, and what it announces), ``external``
(dead letters of another system), ``search`` (failure groups, search by
arguments) and ``repair``. Its faces: ``admin*`` (the admin's pages) and
``cli*`` (``manage.py deadletters``). This module is the stable import path
of the service; its names are imported on first access, so a service module
of a lower layer (the state machine announcing an automatic requeue) can
import ``deadletters.chunks`` without loading the faces or the service.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django_jobretry.deadletters.external import Resubmitted
    from django_jobretry.deadletters.service import (
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
    from django_jobretry.exceptions import NotDead, RequeueConflict

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

#: Where the public names live that the service module does not define.
_ELSEWHERE = {
    "NotDead": "django_jobretry.exceptions",
    "RequeueConflict": "django_jobretry.exceptions",
    "Resubmitted": "django_jobretry.deadletters.external",
}


def __getattr__(name: str) -> object:
    """The public names, imported on first access (see the module docstring)."""
    if name in __all__:
        module = _ELSEWHERE.get(name, "django_jobretry.deadletters.service")
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'django_jobretry.deadletters' has no attribute {name!r}")
