"""The watchdog: no database round trip of the worker's own threads waits without end.

PostgreSQL's ``statement_timeout`` bounds a statement the server received;
it does nothing for one lost on the way. A partitioned network (packets
dropped) or a relay, proxy or pooler that keeps the client's TCP connection
open and acknowledges every byte while its other side is gone leaves the
client waiting for an answer that never comes; kernel TCP options (keepalives,
``tcp_user_timeout``) cannot see the second case at all, since the near end
does answer. So the client bounds its own waits.

Every round trip of a guarded connection (a statement, a commit, LISTEN's
reads) is registered while it waits. A call that has waited ``SLOW_AFTER``
seconds starts a *probe*: a new connection to the same database, bounded by
``connect_timeout``, that asks what the call's server session is doing.
When the probe cannot connect either, the database is unreachable; when the
server shows the session idle, or not at all, the statement or its answer
was lost on the way (and stays lost after a heal). Either way the watchdog
logs it, naming the worker, the alias, host and port and how long the call
waited, and shuts the waiting connection's socket down, so the call fails
with OperationalError and the thread's usual reconnect path runs. When the
server shows the session active, the statement is only slow (say waiting
for a lock): it waits on until ``STATEMENT_TIMEOUT_MS`` plus
``NO_ANSWER_MARGIN``, by which time the server has cancelled it if it ever
got it, and is then cut the same way. A stopping worker also cuts whatever
still waits when its grace period is over (:meth:`Watchdog.give_up_at`).

The probe's pieces live here too (:func:`server_states`, :func:`lost`), with
:func:`where`, which names a database as every log line of the worker's
connections does: ``database 'default' at host:port``.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg
from django.db import connections

from django_jobretry.conf import jobretry_settings

logger = logging.getLogger("django_jobretry")

#: A call waiting this long makes the watchdog check whether the database can be reached.
SLOW_AFTER = 2.0
#: Past the server's statement_timeout, how long an answer may still take to arrive.
NO_ANSWER_MARGIN = 2.0
#: How often the watchdog looks at the calls waiting.
TICK = 0.25
#: Once a stopping worker's grace is over, how long one more call may wait (its goodbye, say).
LAST_CALL = 0.5

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


@dataclass(eq=False)
class Call:
    """One round trip that has not come back yet."""

    raw: Any  # the psycopg connection waiting
    alias: str
    address: tuple[str, str] | None  # its host and port, as it connected
    backend_pid: int  # its server session (0: unknown)
    thread: str
    started: float = field(default_factory=time.monotonic)
    reachable: bool = False  # a probe connected while this call waited: it is slow, not lost

    def key(self) -> tuple[str, tuple[str, str] | None]:
        """What a probe checks: this database, at this address."""
        return self.alias, self.address


class Watchdog(threading.Thread):
    """Cuts the round trips of guarded connections that wait for an answer that is not coming."""

    def __init__(self, worker_id: str) -> None:
        super().__init__(name="jobretry-watchdog", daemon=True)
        self.worker_id = worker_id
        self.no_answer_after = jobretry_settings.session_timeouts_ms["statement_timeout"] / 1000 + (
            NO_ANSWER_MARGIN
        )
        self._calls: set[Call] = set()
        self._lock = threading.Lock()
        self._probes: dict[tuple[str, tuple[str, str] | None], threading.Thread] = {}
        self._stopped = threading.Event()
        #: time.monotonic() after which nothing waits any more (a stopping worker's grace); None: never.
        self._give_up_at: float | None = None

    def watching(self, call: Call) -> None:
        with self._lock:
            self._calls.add(call)

    def done(self, call: Call) -> None:
        with self._lock:
            self._calls.discard(call)

    def give_up_at(self, when: float) -> None:
        """Cut whatever still waits at ``when`` (time.monotonic()). Safe in a signal handler: no lock."""
        self._give_up_at = when

    def giving_up_at(self) -> float | None:
        return self._give_up_at

    def stop(self) -> None:
        self._stopped.set()

    def run(self) -> None:
        while not self._stopped.wait(TICK):
            self.check(time.monotonic())

    def check(self, now: float) -> None:
        """Cut the calls that waited too long; start a probe for those slow enough to doubt."""
        give_up_at = self._give_up_at
        with self._lock:
            for call in list(self._calls):
                waited = now - call.started
                if give_up_at is not None and now - max(call.started, give_up_at) >= LAST_CALL:
                    self._cut(call, waited, "the worker's grace period is over")
                elif waited >= self.no_answer_after:
                    why = f"the server would have cancelled it after {self.no_answer_after:g}s"
                    self._cut(call, waited, why)
                elif waited >= SLOW_AFTER and not call.reachable and (key := call.key()) not in self._probes:
                    self._probes[key] = probe = threading.Thread(
                        target=self._probe, args=(key, now), name="jobretry-probe", daemon=True
                    )
                    probe.start()

    def _probe(self, key: tuple[str, tuple[str, str] | None], started: float) -> None:
        """Connect anew and ask what the sessions of the calls waiting since ``started`` are doing.

        No new connection: the database is unreachable. A session the server
        does not show as running a statement will never answer: the
        statement or its answer was lost (a heal does not bring lost bytes
        back). An active one is slow, and waits on.
        """
        with self._lock:
            waiting = [call for call in self._calls if call.key() == key and call.started <= started]
        try:
            pooled = bool(connections.settings.get(key[0], {}).get("DISABLE_SERVER_SIDE_CURSORS"))
            states = server_states(probe_params(*key), [] if pooled else [c.backend_pid for c in waiting])
        finally:
            with self._lock:
                del self._probes[key]
        with self._lock:
            for call in waiting:
                if call not in self._calls:
                    continue  # it came back meanwhile
                why = lost(call.backend_pid, states, pooled)
                if why is None:
                    call.reachable = True
                else:
                    self._cut(call, time.monotonic() - call.started, why)

    def _cut(self, call: Call, waited: float, why: str) -> None:
        """Log, then shut the socket down under the call: it fails at once (caller holds the lock)."""
        self._calls.discard(call)
        place = where(call.alias, address=call.address)
        logger.warning(
            "%s did not answer %s of worker %s for %.1fs and %s: closing that connection to reconnect",
            place,
            call.thread,
            self.worker_id,
            waited,
            why,
            extra={
                "worker": self.worker_id,
                "database": call.alias,
                "where": place,
                "waiting": call.thread,
                "waited": round(waited, 3),
                "outcome": "database_no_answer",
            },
        )
        shut_down(call.raw)


class _Installed:
    """The watchdog of the worker running in this process, if any."""

    dog: Watchdog | None = None


_installed = _Installed()


def start(worker_id: str) -> Watchdog:
    """The watchdog of this worker process, started; it guards the bookkeeping connections from now on."""
    dog = _installed.dog = Watchdog(worker_id)
    dog.start()
    return dog


def stop() -> None:
    dog, _installed.dog = _installed.dog, None
    if dog is not None:
        dog.stop()


def connect_timeout(configured: int) -> int:
    """``configured`` (0: no limit), or less when a stopping worker's grace ends sooner (at least 2 s)."""
    dog = _installed.dog
    when = None if dog is None else dog.giving_up_at()
    if when is None:
        return configured
    left = max(2, math.ceil(when - time.monotonic()))
    return left if configured <= 0 else min(configured, left)


def give_up_at(when: float) -> None:
    """Cut every call still waiting at ``when`` (time.monotonic()); the stopping worker's grace period."""
    dog = _installed.dog
    if dog is not None:
        dog.give_up_at(when)


def guard(raw: Any, alias: str) -> None:
    """Watch every round trip of the psycopg connection ``raw`` while a worker's watchdog runs.

    psycopg sends each statement, commit and read of notifications through
    ``Connection.wait()``; wrapping it on this connection alone covers them all.
    """
    if getattr(raw, "_jobretry_guarded", False):
        return
    original, address = raw.wait, address_of(raw)
    try:
        backend_pid = int(raw.info.backend_pid)
    except Exception:
        backend_pid = 0

    def wait(*args: Any, **kwargs: Any) -> Any:
        dog = _installed.dog
        if dog is None:
            return original(*args, **kwargs)
        call = Call(raw, alias, address, backend_pid, _thread_name())
        dog.watching(call)
        try:
            return original(*args, **kwargs)
        finally:
            dog.done(call)

    raw.wait = wait
    raw._jobretry_guarded = True


def _thread_name() -> str:
    """How a log line names the waiting thread: the worker's loop runs on the main thread."""
    current = threading.current_thread()
    return "the main loop" if current is threading.main_thread() else current.name
