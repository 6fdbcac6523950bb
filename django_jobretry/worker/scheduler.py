"""The scheduler thread: every worker looks for due schedule slots; no leader, no beat process.

Each worker process that declares schedules runs one, on a connection of
its own. It writes the process's declarations to their rows at start, then
sleeps until the next slot is due (by the database clock, read at each
look) and looks (services/schedules.py). Any number of workers may look at
once: a slot is decided by whoever holds its schedule's row lock, once.

Not in the heartbeat thread: a look at a thousand schedules must never
delay a lease extension. A look that fails (the database restarting, a
table not migrated yet) is logged, once per failing stretch, and retried
after a pause; it never stops the worker. One schedule that cannot be
declared or moved on fails alone, logged by name once per failing stretch
(jobs/isolation.py); the others run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from django.db import DatabaseError

from django_jobretry.conf.schedules import ScheduleSpec
from django_jobretry.services import schedules
from django_jobretry.worker.session import (
    drop_connection,
    log_database_error,
    mark_bookkeeping_thread,
    unmark_bookkeeping_thread,
)

logger = logging.getLogger("django_jobretry")

#: The longest the thread sleeps between looks: a schedule declared or resumed by another
#: process, or a paused one resumed, is seen within this.
MAX_SLEEP = 30.0
#: The shortest: a slot due already (a schedule waiting for its live run, overlap "queue")
#: is looked at again after this, not in a busy loop.
MIN_SLEEP = 0.5
#: After a failed look.
RETRY_AFTER = 5.0


class Scheduler(threading.Thread):
    """Declares this process's schedules, then inserts their due runs until ``stop`` is set."""

    def __init__(
        self, worker_id: str, specs: Callable[[], Mapping[str, ScheduleSpec]], stop: threading.Event
    ) -> None:
        super().__init__(name="jobretry-scheduler", daemon=True)
        self.worker_id, self.specs, self.stop = worker_id, specs, stop
        #: This process's schedules, read and written to their rows at the first look.
        self.declared: Mapping[str, ScheduleSpec] | None = None
        #: Looks made so far.
        self.looks = 0
        #: Its schedules, each done alone when one statement for all fails: which failed last.
        self.apart = schedules.looks()

    def run(self) -> None:
        mark_bookkeeping_thread()
        failing = False
        try:
            while not self.stop.is_set():
                try:
                    wait = self.look()
                except DatabaseError as exc:
                    level = logging.DEBUG if failing else logging.WARNING
                    log_database_error(level, "could not look at the schedules", exc, self.worker_id)
                    drop_connection()
                    failing, wait = True, RETRY_AFTER
                else:
                    failing = False
                self.stop.wait(wait)
        finally:
            unmark_bookkeeping_thread()
            drop_connection()

    def look(self) -> float:
        """Declare once, then one look; how long to sleep before the next.

        The declarations are read once, at the first look: they are complete
        once Django has started (a task registered later is check E015), and
        parsing a thousand of them again would cost every look more CPU than
        its statements take.
        """
        if self.declared is None:
            specs = self.specs()
            schedules.declare_rows(specs, self.apart)
            self.declared = specs
        until = schedules.run_due(self.declared, self.apart)
        self.looks += 1
        if until is None:
            return MAX_SLEEP
        return min(MAX_SLEEP, max(MIN_SLEEP if until <= 0 else 0.0, until))
