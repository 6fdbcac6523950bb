"""Database sessions of the worker's own threads: bounded, and reconnecting.

Only the bookkeeping threads (main loop, heartbeat) get the timeouts; the
threads that run job handlers keep the project's normal sessions, so a job's
long report query is not cut by the worker's statement_timeout. Behind a
transaction pooler a session setting would stay on a shared server
connection, so there the timeouts are the role's business (pooling.py).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, connection
from django.db.backends.signals import connection_created
from django.dispatch import receiver

from django_jobretry.conf import jobretry_settings
from django_jobretry.services.sql import loggable

logger = logging.getLogger("django_jobretry")

_bookkeeping_threads: set[int] = set()


def mark_bookkeeping_thread() -> None:
    """Give this thread's (next) connection the worker session settings (docs/design.md#rule-8)."""
    _bookkeeping_threads.add(threading.get_ident())
    if connection.connection is not None:
        apply_timeouts(connection)


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
        apply_timeouts(connection)


class Backoff:
    """Exponential reconnect delays: 0.5 s doubling to 30 s, reset on success."""

    def __init__(self, first: float = 0.5, cap: float = 30.0) -> None:
        self.first, self.cap = first, cap
        self.next = first

    def failed(self) -> float:
        delay, self.next = self.next, min(self.next * 2, self.cap)
        return delay

    def succeeded(self) -> None:
        self.next = self.first


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
        logger.warning(
            "database unavailable; reconnecting in %.1fs",
            delay,
            extra={"worker": worker_id, "error": str(exc)},
        )
        drop_connection()
        return delay
    log_database_error(
        logging.ERROR, f"database error in the worker loop; retrying in {delay:.1f}s", exc, worker_id
    )
    return delay


def log_database_error(level: int, what: str, exc: BaseException, worker_id: str) -> None:
    """``what`` and the error's class and SQLSTATE - never its message (services.sql.loggable)."""
    fields = loggable(exc)
    logger.log(
        level,
        "%s (%s, SQLSTATE %s)",
        what,
        fields["error_class"],
        fields["sqlstate"],
        extra={"worker": worker_id, **fields},
    )
