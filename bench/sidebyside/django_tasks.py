"""The ``django.tasks`` tasks of the django-tasks-db bench (settings_tasks_db.py)."""

from __future__ import annotations

import asyncio

from django.tasks import task

from bench.sidebyside.stamps import record


@task
def noop(number: int) -> None:
    """Does nothing."""


@task
def stamp(number: int) -> None:
    """Enqueue to start: writes when it started."""
    record(number)


@task
async def async_noop(number: int) -> None:
    """Does nothing, as a coroutine (``db_worker`` runs it with ``async_to_sync``)."""


@task
async def sleeps(number: int, seconds: float) -> None:
    """I/O-bound: awaits ``seconds`` (workloads.IO_SECONDS)."""
    await asyncio.sleep(seconds)
