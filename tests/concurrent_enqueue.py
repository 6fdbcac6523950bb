"""Enqueue one call from many threads in a spawned process, released by a barrier shared with other processes.

Imported by spawned children before Django is set up: nothing here imports
Django at module level.
"""

from __future__ import annotations

import os
import threading
from typing import Any

#: Seconds any wait of a child may take before it gives up (the test then fails on a missing result).
DEADLINE = 120


def enqueue_from_threads(
    database_url: str, task: str, call: tuple[Any, ...], threads: int, sync: tuple[Any, Any]
) -> None:
    """In a new process: ``threads`` threads enqueue ``tests.jobs_app.unique_jobs.<task>(*call)`` at once.

    ``sync`` is the barrier all threads of all processes wait on, and the
    queue that gets one list from this process: each thread's job id, or the
    repr of what it raised.
    """
    barrier, results = sync
    os.environ["DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    import django

    django.setup()
    from django.db import connections

    from tests.jobs_app import unique_jobs

    definition = getattr(unique_jobs, task)
    got: list[int | str] = []

    def enqueue() -> None:
        try:
            barrier.wait(DEADLINE)
            got.append(definition.enqueue(*call).pk)
        except Exception as exc:  # reported to the test, which asserts on it
            got.append(repr(exc))
        finally:
            connections.close_all()

    workers = [threading.Thread(target=enqueue) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(DEADLINE)
    results.put(got)
