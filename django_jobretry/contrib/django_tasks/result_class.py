"""``JobRetryTaskResult``: Django's ``TaskResult``, saying whether its ``enqueue()`` was deduplicated.

``TaskResult`` is a frozen dataclass with slots: no attribute can be added
to one, so every result this backend hands out is of this subclass. Its one
field takes no part in equality, so a fetched result still equals the
enqueued one. Touches no model: the backend module imports it while Django
reads the settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.tasks.base import TaskResult

if TYPE_CHECKING:
    _Result = TaskResult[Any, Any]
else:  # generic in django-stubs only
    _Result = TaskResult


# django-stubs declares TaskResult a plain dataclass; Django's own is frozen, as this one must be.
@dataclass(frozen=True, slots=True, kw_only=True)
class JobRetryTaskResult(_Result):  # type: ignore[misc]
    """A task result of JobRetryBackend (docs/django-tasks.md#deduplicated-enqueues)."""

    #: True on the result of an ``enqueue()`` whose unique key a job already held: the result is
    #: that job's, not a new one's. False on a new task's result and on any ``get_result()``.
    deduplicated: bool = field(default=False, compare=False)
