"""The watch on the worker's event loop: a coroutine that blocks it is named, with how long it blocked.

A coroutine that calls blocking code (``time.sleep``, ``requests``, a plain
ORM call through a library that hides it) stops every other coroutine of the
worker. Nothing on the loop can notice, so a thread of its own asks the loop
to answer every ``PING_EVERY`` seconds. An answer later than
``BLOCKED_SECONDS`` means a task holds the loop: the watch names its job at
once (the block may never end) and again, with how long it lasted, when the
loop answers. The cost is one callback on the loop per ping.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from django_jobretry.jobs.claimed import AttemptKey

logger = logging.getLogger("django_jobretry")

#: A loop that does not answer for this long is blocked (seconds; asyncio's debug mode says 0.1).
BLOCKED_SECONDS = 0.5
#: How often the watch asks the loop to answer, in seconds.
PING_EVERY = 0.1


class LoopWatch(threading.Thread):
    """Pings ``loop``; a late answer is logged, naming the job of the task that held it (from ``tasks``)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, tasks: Mapping[AttemptKey, asyncio.Task[Any]]
    ) -> None:
        super().__init__(name="jobretry-loop-watch", daemon=True)
        self.loop, self.tasks = loop, tasks
        self.stopping = threading.Event()

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        while not self.stopping.is_set():
            answered = threading.Event()
            asked = time.monotonic()
            try:
                self.loop.call_soon_threadsafe(answered.set)
            except RuntimeError:  # the loop is closed: the worker stops
                return
            if answered.wait(BLOCKED_SECONDS):
                self.stopping.wait(PING_EVERY)
                continue
            holder = self._holder()
            self._log(holder, BLOCKED_SECONDS, " and still does")
            while not answered.wait(PING_EVERY):
                if self.stopping.is_set():
                    return
            self._log(holder, time.monotonic() - asked)

    def _holder(self) -> AttemptKey | None:
        """The attempt whose task runs on the loop now (read from this thread: a dict lookup)."""
        task = asyncio.current_task(self.loop)
        return next((key for key, running in list(self.tasks.items()) if running is task), None)

    def _log(self, holder: AttemptKey | None, seconds: float, still: str = "") -> None:
        if holder is None:
            logger.warning(
                "the event loop was blocked for %.1f s%s, outside any job's task",
                seconds,
                still,
                extra={"outcome": "event_loop_blocked", "blocked_seconds": round(seconds, 3)},
            )
            return
        job_id, attempt = holder
        logger.warning(
            "job %s attempt %s blocked the event loop for %.1f s%s: every other coroutine waited. "
            "A coroutine must await, never block: call blocking code with sync_to_async, or make it a def",
            job_id,
            attempt,
            seconds,
            still,
            extra={
                "job_id": job_id,
                "attempt": attempt,
                "outcome": "event_loop_blocked",
                "blocked_seconds": round(seconds, 3),
            },
        )
