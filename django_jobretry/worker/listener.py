"""LISTEN/NOTIFY: wakes the worker as soon as a job is enqueued.

Only a wake-up (docs/design.md#rule-9): if the listener is down the worker still
polls every POLL_SECONDS, and the listener reconnects with backoff. It connects
with the DATABASES entry ``JOBRETRY["LISTEN_DATABASE"]`` names (by default the
worker's own): behind a transaction pooler that alias must reach PostgreSQL
directly (django_jobretry/conf/databases.py).

An idle LISTEN connection only reads, and a lost one reads nothing, just as
an idle one does: so after ``PING_AFTER`` seconds without a notification the
listener asks the server for a reply (LISTEN again), which the watchdog bounds like every
other round trip of the worker (worker/watchdog.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS

from django_jobretry.conf.databases import listen_alias
from django_jobretry.jobs.insert import CHANNEL
from django_jobretry.worker import watchdog
from django_jobretry.worker.session import RECONNECT_CAP, Backoff

logger = logging.getLogger("django_jobretry")

#: Seconds of silence after which the listener checks that its connection still answers.
PING_AFTER = 5.0


class Listener(threading.Thread):
    """A daemon thread holding one LISTEN connection; sets ``wake`` on notifications."""

    def __init__(self, wake: threading.Event, stop: threading.Event, queues: Sequence[str] | None) -> None:
        super().__init__(name="jobretry-listener", daemon=True)
        self.wake, self.stop, self.queues = wake, stop, set(queues or [])
        self.alias = listen_alias() or DEFAULT_DB_ALIAS
        self.params = watchdog.probe_params(self.alias)
        self.listening = threading.Event()

    def run(self) -> None:
        backoff = Backoff(cap=RECONNECT_CAP)
        while not self.stop.is_set():
            try:
                with psycopg.connect(**self.params, autocommit=True) as conn:
                    watchdog.guard(conn, self.alias)
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    backoff.succeeded()
                    # Wake once on (re)connect: something may have arrived meanwhile.
                    self.wake.set()
                    self._listen(conn)
            except psycopg.Error as exc:
                self.listening.clear()
                delay = backoff.failed()
                place = watchdog.where(self.alias)
                logger.warning(
                    "LISTEN connection lost (%s); polling until it is back, reconnecting in %.1fs",
                    place,
                    delay,
                    extra={"database": self.alias, "where": place, "error": str(exc), "retry_in": delay},
                )
                self.stop.wait(delay)
        self.listening.clear()

    def _listen(self, conn: psycopg.Connection[Any]) -> None:
        """Wake the worker on each notification for its queues; ask for a reply after a silence."""
        heard = time.monotonic()
        while not self.stop.is_set():
            for note in conn.notifies(timeout=0.5):
                heard = time.monotonic()
                if not self.queues or note.payload in self.queues:
                    self.wake.set()
            if time.monotonic() - heard >= PING_AFTER:
                # LISTEN again: a no-op for the server, answered like any statement.
                conn.execute(f"LISTEN {CHANNEL}")
                heard = time.monotonic()
