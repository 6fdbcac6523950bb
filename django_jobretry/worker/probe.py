"""The watchdog's probe: is a database reachable, and what are the sessions of the calls waiting on it doing?

Also where a database is, as log lines name it: ``database 'default' at host:port``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any

import psycopg
from django.db import connections

logger = logging.getLogger("django_jobretry")

#: ``connect_timeout`` of the probe's connection, and of the worker's own connections unless set.
CONNECT_TIMEOUT = 4
#: At most this ``connect_timeout`` for the probe itself: a call has waited already, and a warning is due.
PROBE_CONNECT_TIMEOUT = 3


def address_of(raw: Any) -> tuple[str, str] | None:
    """The host and port a psycopg connection is connected to; None once it is closed."""
    try:
        return raw.info.host, str(raw.info.port)
    except Exception:  # a closed connection keeps no address
        return None


def where(alias: str, raw: Any = None, address: tuple[str, str] | None = None) -> str:
    """``database 'default' at host:port``: the connection's address, else the settings'."""
    host, port = address or (raw is not None and address_of(raw)) or ("", "")
    if not host:
        settings = connections.settings.get(alias, {})
        host, port = settings.get("HOST") or "localhost", str(settings.get("PORT") or 5432)
    return f"database {alias!r} at {host}:{port}"


def probe_params(alias: str, address: tuple[str, str] | None = None) -> dict[str, Any]:
    """psycopg.connect() keywords of ``alias`` (at ``address``), bounded by connect_timeout unless set."""
    params: dict[str, Any] = connections[alias].get_connection_params()
    for key in ("cursor_factory", "context"):
        params.pop(key, None)
    params.setdefault("connect_timeout", CONNECT_TIMEOUT)
    if address is not None:
        params["host"], params["port"] = address
    return params


def shut_down(raw: Any) -> None:
    """Shut the socket of a psycopg connection down: what waits on it fails at once; the fd stays open."""
    try:
        with socket.socket(fileno=os.dup(raw.pgconn.socket)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except Exception:  # the connection was closed meanwhile: nothing to cut
        logger.debug("could not shut a connection's socket down", exc_info=True)


def server_states(params: dict[str, Any], pids: list[int]) -> dict[int, str | None] | None:
    """pg_stat_activity's state of each backend in ``pids``, seen from a new connection; None: no connection.

    The probe's own statement is bounded like the connect: a timer shuts its socket down.
    """
    params = {**params, "connect_timeout": min(int(float(params["connect_timeout"])), PROBE_CONNECT_TIMEOUT)}
    try:
        with psycopg.connect(**params, autocommit=True) as probe:
            timer = threading.Timer(float(params["connect_timeout"]), shut_down, [probe])
            timer.start()
            try:
                rows = probe.execute(SESSION_STATES, [pids]).fetchall() if pids else []
            finally:
                timer.cancel()
    except Exception:  # any failure means: not reachable from here, now
        return None
    return dict(rows)


SESSION_STATES = "SELECT pid, state FROM pg_stat_activity WHERE pid = ANY(%s)"


def lost(backend_pid: int, states: dict[int, str | None] | None, pooled: bool) -> str | None:
    """Why a call on session ``backend_pid`` will never be answered, by ``states``; None: it may be."""
    if states is None:
        return "a new connection failed too"
    if pooled or not backend_pid or states.get(backend_pid, "") is None:
        return None  # behind a pooler, or not allowed to see the session: only slow, as far as we know
    state = states.get(backend_pid) or "gone"
    if state == "active":
        return None
    return f"its server session is {state}, so the statement or its answer was lost"
