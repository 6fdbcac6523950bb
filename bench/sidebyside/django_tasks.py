"""The ``django.tasks`` tasks of the django-tasks-db bench (settings_tasks_db.py)."""

from __future__ import annotations

from django.tasks import task

from bench.sidebyside.stamps import record


@task
def noop(number: int) -> None:
    """Does nothing."""


@task
def stamp(number: int) -> None:
    """Enqueue to start: writes when it started."""
    record(number)
