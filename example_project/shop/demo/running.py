"""How the demo runs its jobs: real workers in its own process, bounded by deadlines.

Burst workers (like `runworker --burst`) run the jobs of the first chapters
and the repair. They never look at schedules and stop before a breaker's
cooldown ends, so the schedule and outage chapters run a worker that keeps
running, with its scheduler thread and its heartbeat, as `runworker` does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from django.core.management.base import CommandError
from django.db import connections
from django.db.models import Min
from django.utils import timezone

from django_jobretry.models import Job, JobStatus
from django_jobretry.worker import Worker, WorkerOptions

#: A chapter still waiting after this stops the demo with an error; each takes a few seconds.
CHAPTER_DEADLINE_SECONDS = 30
#: The same for bursts; the demo policy retries in < 1 s.
BURSTS_DEADLINE_SECONDS = 20
#: How often the demo asks whether the chapter's story is over.
POLL_SECONDS = 0.1


def run_worker_until(done: Callable[[], bool], options: WorkerOptions, what: str) -> None:
    """Run a worker with ``options`` in a thread until ``done()``, then stop it gracefully.

    The worker's thread installs no signal handlers, so Ctrl-C reaches the
    demo, which still stops the worker on its way out.
    """
    worker = Worker(options)
    thread = threading.Thread(target=_run, args=(worker,), name="demo-worker", daemon=True)
    deadline = time.monotonic() + CHAPTER_DEADLINE_SECONDS
    thread.start()
    try:
        while not done():
            if time.monotonic() > deadline:
                raise CommandError(
                    f"still waiting for {what} after {CHAPTER_DEADLINE_SECONDS}s; is the database slow?"
                )
            if not thread.is_alive():
                raise CommandError(f"the demo's worker stopped while waiting for {what}")
            time.sleep(POLL_SECONDS)
    finally:
        worker.stop()
        thread.join(timeout=CHAPTER_DEADLINE_SECONDS)


def _run(worker: Worker) -> None:
    try:
        worker.run()
    finally:
        connections.close_all()


def run_bursts_until_final(ids: Iterable[int]) -> None:
    """Burst workers until every job of ``ids`` has succeeded or died.

    A burst worker exits once nothing is due; a retry is due a fraction of
    a second later under the demo policy, so the next burst picks it up.
    """
    deadline = time.monotonic() + BURSTS_DEADLINE_SECONDS
    live = Job.objects.filter(pk__in=list(ids), status__in=[JobStatus.READY, JobStatus.RUNNING])
    while live.exists():
        if time.monotonic() > deadline:
            raise CommandError(f"jobs still live after {BURSTS_DEADLINE_SECONDS}s; is the database slow?")
        Worker(WorkerOptions(queues=["demo"], concurrency=4, burst=True, listen=False)).run()
        next_due = live.filter(status=JobStatus.READY).aggregate(at=Min("run_at"))["at"]
        if next_due is not None:
            time.sleep(min(max((next_due - timezone.now()).total_seconds(), 0), 1))
