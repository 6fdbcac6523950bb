"""Issue 24's acceptance: 20 threads in 4 processes enqueue one deduplicated call at once; one job results.

Real processes (spawned, each with its own Django and connections) and
real threads, released together by one barrier, on the test database.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

from django_jobretry.models import Job
from tests.concurrent_enqueue import DEADLINE, enqueue_from_threads
from tests.processes import test_database_url

pytestmark = pytest.mark.django_db(transaction=True)

PROCESSES, THREADS = 4, 5


def enqueue_at_once(task: str, call: tuple[Any, ...]) -> list[int | str]:
    """Every thread's job id (or error), from PROCESSES processes of THREADS threads released together."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES * THREADS)
    results = context.Queue()
    processes = [
        context.Process(
            target=enqueue_from_threads, args=(test_database_url(), task, call, THREADS, (barrier, results))
        )
        for _ in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    got: list[int | str] = []
    try:
        for _ in processes:
            got += results.get(timeout=DEADLINE)
    finally:
        for process in processes:
            process.join(DEADLINE)
            if process.is_alive():
                process.kill()
    assert all(process.exitcode == 0 for process in processes), [p.exitcode for p in processes]
    return got


@pytest.mark.parametrize(
    ("task", "call"),
    [
        ("receipt", (42,)),  # a key from the arguments, held while live: the unique index decides
        ("invoice", (42, "customer")),  # with unique_for: the per-key lock decides
    ],
)
def test_twenty_callers_in_four_processes_get_the_one_job(task: str, call: tuple[Any, ...]) -> None:
    ids = enqueue_at_once(task, call)
    assert len(ids) == PROCESSES * THREADS
    (only,) = Job.objects.values_list("pk", flat=True)
    assert ids == [only] * len(ids)
