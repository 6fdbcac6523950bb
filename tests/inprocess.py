"""Run the real worker engine in the test's own process, bounded by a watchdog.

The main loop runs on the calling thread and its connection (so
CaptureQueriesContext sees its statements); handlers run on runner threads.
Tests using it need ``django_db(transaction=True)``: runner threads cannot
see rows of an uncommitted test transaction.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_jobretry.models import Job
from django_jobretry.worker import Worker, WorkerOptions

#: Seconds a burst may take before the watchdog stops the worker and the test fails.
DEADLINE = 60


@pytest.fixture
def keep_signal_handlers() -> Iterator[None]:
    """Worker.run() installs SIGTERM/SIGINT handlers on the main thread; put ours back."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def run_burst(**options: Any) -> list[str]:
    """Run a burst worker here; returns every statement of its main loop, BEGIN and COMMIT included.

    Lease recovery runs once, at the start: on a timer it would add
    statements by the second, not by the job. The event loop is off unless
    asked for: the test app registers ``async def`` jobs, whose claim would
    add a statement by the poll interval to plain jobs' budgets
    (worker/event_loop.py CoroutineClaim; its own budget is tested apart).
    """
    options = {"async_concurrency": 0, **options}
    worker = Worker(WorkerOptions(burst=True, listen=False, recover_every=3600, **options))
    overdue = threading.Event()

    def stop_overdue() -> None:
        overdue.set()
        worker.stop()

    watchdog = threading.Timer(DEADLINE, stop_overdue)
    watchdog.start()
    try:
        with CaptureQueriesContext(connection) as captured:
            assert worker.run() == 0
    finally:
        watchdog.cancel()
    assert not overdue.is_set(), f"the burst did not end within {DEADLINE} s"
    return [" ".join(q["sql"].split()) for q in captured.captured_queries]


def run_until_settled(rounds: int = 40, within: float | None = None, **options: Any) -> None:
    """Bursts until no job is live: retries are due a few milliseconds after a burst may end.

    ``within`` (seconds) bounds the bursts by a deadline instead of a count,
    for jobs whose retries keep coming for a while (a burst ends as soon as
    nothing is due, so a count of bursts would run out while they wait).
    """
    deadline = None if within is None else time.monotonic() + within
    burst = 0
    while (burst < rounds) if deadline is None else (time.monotonic() < deadline):
        burst += 1
        run_burst(**options)
        if not Job.objects.live().exists():
            return
    raise AssertionError(f"jobs still live after {burst} bursts: {list(Job.objects.live().values())}")
