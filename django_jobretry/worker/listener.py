"""LISTEN/NOTIFY: wakes the worker as soon as a job is enqueued.

Only a wake-up (docs/design.md#rule-9): if the listener is down the worker still
polls every POLL_SECONDS, and the listener reconnects with backoff. It connects
with the DATABASES entry ``JOBRETRY["LISTEN_DATABASE"]`` names (by default the
worker's own): behind a transaction pooler that alias must reach PostgreSQL
directly (django_jobretry/conf/pooling.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections

from django_jobretry.conf.pooling import listen_alias
from django_jobretry.services.enqueue import CHANNEL
from django_jobretry.worker.session import Backoff

logger = logging.getLogger("django_jobretry")


class Listener(threading.Thread):
    """A daemon thread holding one LISTEN connection; sets ``wake`` on notifications."""

    def __init__(self, wake: threading.Event, stop: threading.Event, queues: Sequence[str] | None) -> None:
        super().__init__(name="jobretry-listener", daemon=True)
        self.wake, self.stop, self.queues = wake, stop, set(queues or [])
        self.params = connections[listen_alias() or DEFAULT_DB_ALIAS].get_connection_params()
        for key in ("cursor_factory", "context"):
            self.params.pop(key, None)
        self.listening = threading.Event()

    def run(self) -> None:
        backoff = Backoff()
        while not self.stop.is_set():
            try:
                with psycopg.connect(**self.params, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    backoff.succeeded()
                    # Wake once on (re)connect: something may have arrived meanwhile.
                    self.wake.set()
                    while not self.stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            if not self.queues or note.payload in self.queues:
                                self.wake.set()
            except psycopg.Error as exc:
                self.listening.clear()
                delay = backoff.failed()
                logger.warning(
                    "LISTEN connection lost; polling until it is back",
                    extra={"error": str(exc), "retry_in": delay},
                )
                self.stop.wait(delay)
        self.listening.clear()
