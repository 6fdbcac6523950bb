"""Database sessions of the worker's own threads: bounded, and reconnecting; and its LISTEN session.

Only the bookkeeping threads (main loop, heartbeat, scheduler) get the
timeouts; the threads that run job handlers keep the project's normal
sessions, so a job's long report query is not cut by the worker's
statement_timeout. Behind a transaction pooler a session setting would stay
on a shared server connection, so there the timeouts are the role's
business (conf/databases.py). The server's timeouts bound what reaches the server;
the watchdog (worker/watchdog.py) bounds the waits of these connections on
this side too, and their connects are bounded by ``connect_timeout``.

The :class:`Listener` thread holds one more session, LISTEN/NOTIFY, which
only wakes the worker as soon as a job is enqueued (docs/design.md#rule-9):
if it is down the worker still polls every POLL_SECONDS, and it reconnects
with the same :class:`Backoff`. It connects with the DATABASES entry
``JOBRETRY["LISTEN_DATABASE"]`` names (by default the worker's own): behind
a transaction pooler that alias must reach PostgreSQL directly. An idle
LISTEN connection only reads, and a lost one reads nothing, just as an idle
one does: so after ``PING_AFTER`` seconds without a notification the
listener asks the server for a reply (LISTEN again), which the watchdog
bounds like every other round trip of the worker.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError, OperationalError, connection
from django.db.backends.signals import connection_created
from django.dispatch import receiver

from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.databases import listen_alias
from django_jobretry.jobs.insert import CHANNEL
from django_jobretry.jobs.sql import loggable
from django_jobretry.worker import watchdog

logger = logging.getLogger("django_jobretry")

_bookkeeping_threads: set[int] = set()


def mark_bookkeeping_thread() -> None:
    """Give this thread's (next) connection the worker session settings (docs/design.md#rule-8)."""
    _bookkeeping_threads.add(threading.get_ident())
    bound_connects(connection)
    if connection.connection is not None:
        watchdog.guard(connection.connection, connection.alias)
        apply_timeouts(connection)


def bound_connects(wrapper: Any) -> None:
    """This thread's connects give up after ``connect_timeout``: OPTIONS', else 4 s (psycopg's is 130 s).

    A stopping worker's connects also give up when its grace period is over.
    """
    if getattr(wrapper, "_jobretry_bounded", False):
        return
    params = wrapper.get_connection_params

    def bounded() -> dict[str, Any]:
        conn_params: dict[str, Any] = params()
        configured = int(float(conn_params.get("connect_timeout", watchdog.CONNECT_TIMEOUT)))
        conn_params["connect_timeout"] = watchdog.connect_timeout(configured)
        return conn_params

    wrapper.get_connection_params = bounded
    wrapper._jobretry_bounded = True


def unmark_bookkeeping_thread() -> None:
    _bookkeeping_threads.discard(threading.get_ident())


def apply_timeouts(conn: Any) -> None:
    if conn.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS"):
        _say_timeouts_skipped(conn.alias)
        return
    with conn.cursor() as cursor:
        for name, value in jobretry_settings.session_timeouts_ms.items():
            # set_config, not SET: SET cannot take a bound parameter, which
            # breaks under OPTIONS={"server_side_binding": True}.
            cursor.execute("SELECT set_config(%s, %s, false)", [name, f"{value}ms"])


_skipped_said = threading.Event()


def _say_timeouts_skipped(alias: str) -> None:
    """Once per process: the timeouts come from the role (check django_jobretry.W003)."""
    if not _skipped_said.is_set():
        _skipped_said.set()
        logger.info(
            "database %r is transaction-pooled (DISABLE_SERVER_SIDE_CURSORS): the worker's timeouts "
            "are not set per session; the role's settings apply",
            alias,
        )


@receiver(connection_created)
def _configure_new_connection(*, connection: Any, **kwargs: object) -> None:
    if threading.get_ident() in _bookkeeping_threads and connection.vendor == "postgresql":
        watchdog.guard(connection.connection, connection.alias)
        apply_timeouts(connection)


#: The longest wait between two reconnects: a worker is back within seconds of the database.
RECONNECT_CAP = 2.0


class Backoff:
    """Exponential retry delays: 0.5 s doubling to ``cap``, reset on success."""

    def __init__(self, first: float = 0.5, cap: float = 30.0) -> None:
        self.first, self.cap = first, cap
        self.next = first
        self.failing_since: float | None = None

    def failed(self) -> float:
        if self.failing_since is None:
            self.failing_since = time.monotonic()
        delay, self.next = self.next, min(self.next * 2, self.cap)
        return delay

    def succeeded(self) -> float | None:
        """Seconds since the first failure of the stretch that just ended; None if none failed."""
        self.next = self.first
        since, self.failing_since = self.failing_since, None
        return None if since is None else time.monotonic() - since


def drop_connection() -> None:
    """Forget a broken connection so the next query reconnects."""
    try:
        connection.close()
    except Exception:  # closing a dead socket may itself fail; the handle is gone either way
        logger.debug("closing a broken connection failed", exc_info=True)


#: Errors that mean "the database connection is gone": reconnect, do not exit.
CONNECTION_ERRORS = (OperationalError, InterfaceError)


def pause_after(exc: DatabaseError | InterfaceError, backoff: Backoff, worker_id: str) -> float:
    """Log a database error of the main loop; returns the seconds to wait before going on.

    A lost connection is dropped so the next query reconnects. Any other
    error is logged by class and SQLSTATE only: PostgreSQL's message may
    quote a row, i.e. job arguments, which never go to the logs.
    """
    delay = backoff.failed()
    if isinstance(exc, CONNECTION_ERRORS):
        delay = min(delay, RECONNECT_CAP)
        place = watchdog.where(connection.alias, connection.connection)
        logger.warning(
            "database unavailable; reconnecting in %.1fs (%s, worker %s)",
            delay,
            place,
            worker_id,
            extra={"worker": worker_id, "database": connection.alias, "where": place, "error": str(exc)},
        )
        drop_connection()
        return delay
    log_database_error(
        logging.ERROR, f"database error in the worker loop; retrying in {delay:.1f}s", exc, worker_id
    )
    return delay


def log_database_error(level: int, what: str, exc: BaseException, worker_id: str) -> None:
    """``what``, where, and the error's class and SQLSTATE - never its message (jobs.sql.loggable)."""
    fields = loggable(exc)
    place = watchdog.where(connection.alias, connection.connection)
    logger.log(
        level,
        "%s (%s, SQLSTATE %s; %s, worker %s)",
        what,
        fields["error_class"],
        fields["sqlstate"],
        place,
        worker_id,
        extra={"worker": worker_id, "database": connection.alias, "where": place, **fields},
    )


def log_back(down: float | None, worker_id: str, thread: str) -> None:
    """After ``down`` seconds of failures (Backoff.succeeded()), say that the database answers again."""
    if down is None:
        return
    place = watchdog.where(connection.alias, connection.connection)
    logger.info(
        "%s answers %s of worker %s again, after %.1fs",
        place,
        thread,
        worker_id,
        down,
        extra={"worker": worker_id, "database": connection.alias, "where": place, "down": round(down, 3)},
    )


# -- the LISTEN session ----------------------------------------------------------------------------

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
