"""Throwaway ``@job`` tasks and schedules: what a test declares is forgotten when it ends.

``@job`` registers its task and declares its schedule in process-wide
tables. A task or schedule a test defines would otherwise stay for every
later test of the process: in ``declared()``, which the schedule tests run,
and in ``manage.py check``, whose E015 reports tasks registered after
start-up and whose E041-E043 would report a test's broken schedules.

Meant for tasks defined inside the test: a module first imported during
the test would lose its tasks too, and Python does not import it again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django_jobretry import schedules
from django_jobretry.registry import registry


@contextlib.contextmanager
def forgotten_afterwards() -> Iterator[None]:
    """Put back the task registry and the schedules declared in code as they were."""
    tasks, late = dict(registry._tasks), dict(registry._late)
    declared = dict(schedules._declared)
    conflicts = {name: list(sources) for name, sources in schedules.conflicts.items()}
    try:
        yield
    finally:
        _put_back(registry._tasks, tasks)
        _put_back(registry._late, late)
        _put_back(schedules._declared, declared)
        _put_back(schedules.conflicts, conflicts)


def _put_back[T](table: dict[str, T], saved: dict[str, T]) -> None:
    table.clear()
    table.update(saved)
