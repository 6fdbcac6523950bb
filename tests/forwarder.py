"""A TCP forwarder on 127.0.0.1 that a test can turn into a black hole, for partition tests.

While it is blackholed it keeps every socket open and reads what either side
sends, but forwards nothing and drops it: as a partitioned network behind a
relay or pooler does, whose near end still acknowledges every byte, so the
client's kernel sees nothing wrong. A connection accepted meanwhile is held
the same way, never connected upstream. ``heal()`` forwards again; the
connections cut meanwhile stay cut (their streams lost bytes).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from urllib.parse import quote

from django.db import connection

#: Where the forwarder connects: a TCP (host, port), or a Unix socket's path.
Address = tuple[str, int] | str


class Forwarder:
    """Forwards 127.0.0.1:``port`` to ``upstream`` until closed."""

    def __init__(self, upstream: Address) -> None:
        self.upstream = upstream
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.server.getsockname()[1]
        self.forwarding = threading.Event()
        self.forwarding.set()
        self.sockets: list[socket.socket] = []
        self.dropped = 0  # bytes read while blackholed
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="forwarder-accept", daemon=True).start()

    def blackhole(self) -> None:
        self.forwarding.clear()

    def heal(self) -> None:
        self.forwarding.set()

    def close(self) -> None:
        self.server.close()
        with self._lock:
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _keep(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self.sockets.append(sock)
        return sock

    def _accept(self) -> None:
        while True:
            try:
                client = self._keep(self.server.accept()[0])
            except OSError:  # closed
                return
            if not self.forwarding.is_set():
                self._pump(client, None)
                continue
            try:
                upstream = self._keep(_connect(self.upstream))
            except OSError:
                client.close()
                continue
            self._pump(client, upstream)
            self._pump(upstream, client)

    def _pump(self, source: socket.socket, target: socket.socket | None) -> None:
        def run() -> None:
            with contextlib.suppress(OSError):
                while data := source.recv(65536):
                    if target is not None and self.forwarding.is_set():
                        target.sendall(data)
                    else:
                        self.dropped += len(data)
            if target is not None:
                with contextlib.suppress(OSError):
                    target.shutdown(socket.SHUT_WR)

        threading.Thread(target=run, name="forwarder-pump", daemon=True).start()


def _connect(address: Address) -> socket.socket:
    if isinstance(address, str):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(address)
        return sock
    sock = socket.create_connection(address, timeout=5)
    sock.settimeout(None)
    return sock


def test_database() -> Address:
    """Where the test database listens, from the test connection's settings."""
    settings = connection.settings_dict
    host, port = settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432)
    return f"{host}/.s.PGSQL.{port}" if host.startswith("/") else (host, port)


@contextlib.contextmanager
def forwarder() -> Iterator[Forwarder]:
    """A forwarder to the test database, closed at the end."""
    relay = Forwarder(test_database())
    try:
        yield relay
    finally:
        relay.close()


def database_url(relay: Forwarder) -> str:
    """A DATABASE_URL naming the test database through ``relay``."""
    settings = connection.settings_dict
    password = f":{quote(settings['PASSWORD'])}" if settings["PASSWORD"] else ""
    return f"postgresql://{quote(settings['USER'] or '')}{password}@127.0.0.1:{relay.port}/{settings['NAME']}"


test_database.__test__ = False  # type: ignore[attr-defined]
