"""The task registry: the only way a task name read from the database becomes code.

Filled when apps load (each installed app's ``jobs.py`` is imported, like
``admin.py``). The worker looks names up here and never imports a dotted
path taken from a row (spec §4 rule 10).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from django_jobretry.decorators import JobDefinition


class DuplicateTaskName(ImproperlyConfigured):
    """Two different functions were registered under one task name."""


class TaskRegistry:
    """Task name -> job definition, safe to read from worker threads."""

    def __init__(self) -> None:
        self._tasks: dict[str, JobDefinition[Any]] = {}
        self._lock = threading.Lock()

    def register(self, definition: JobDefinition[Any]) -> None:
        with self._lock:
            existing = self._tasks.get(definition.name)
            # Re-importing a module (autoreload, tests) registers the same
            # function again; only a different function is a conflict.
            if existing is not None and _qualname(existing) != _qualname(definition):
                raise DuplicateTaskName(
                    f"task name {definition.name!r} is used by both {_qualname(existing)} and "
                    f"{_qualname(definition)}; pass name=... to @job to tell them apart"
                )
            self._tasks[definition.name] = definition

    def get(self, name: str) -> JobDefinition[Any] | None:
        return self._tasks.get(name)

    def names(self) -> list[str]:
        return sorted(self._tasks)

    def unregister(self, name: str) -> None:
        with self._lock:
            self._tasks.pop(name, None)


def _qualname(definition: JobDefinition[Any]) -> str:
    return f"{definition.func.__module__}.{definition.func.__qualname__}"


registry = TaskRegistry()
