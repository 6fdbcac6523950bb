"""A partitioned database for tests: TCP listeners on 127.0.0.1 that take packets and never answer.

A refused port is an outage the kernel reports at once; a partition is
silence, which only timeouts end. :class:`Blackhole` accepts every
connection and answers nothing, as a database behind a dropped route does
for a new connection. :class:`Forwarder` passes the bytes of each
connection to the real server until a client sends ``marker``; from then on
it is a blackhole too, for the connections it holds and for new ones: a
partition in the middle of a query, which a cancel request cannot cross.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class Blackhole:
    """Accepts connections on 127.0.0.1 and never sends a byte; ``port`` is where."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.server.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.frozen = threading.Event()
        self.frozen.set()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> Blackhole:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the accept() of the listening thread
        self.server.close()
        for sock in self.accepted:
            # shutdown first: a close() alone does not end a recv() blocked in another thread,
            # and the peer would see no FIN until it did.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:  # the listener was closed: the test is over
                return
            self.accepted.append(client)
            self.serve(client)

    def serve(self, client: socket.socket) -> None:
        """Read and drop what the client sends (so its sends are acknowledged, as by a stuck peer)."""
        threading.Thread(target=self._drain, args=(client,), daemon=True).start()

    def _drain(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while sock.recv(65536):
                pass


class Forwarder(Blackhole):
    """Forwards to ``target`` until a client sends ``marker``; silent for every connection after that."""

    def __init__(self, target: tuple[str, int] | str, marker: bytes) -> None:
        """``target``: a (host, port), or the path of a Unix socket (an embedded server's)."""
        super().__init__()
        self.target, self.marker = target, marker
        self.frozen.clear()

    def serve(self, client: socket.socket) -> None:
        if self.frozen.is_set():
            super().serve(client)
            return
        if isinstance(self.target, str):
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.target)
        else:
            upstream = socket.create_connection(self.target)
        self.accepted.append(upstream)
        threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if from_client and self.marker in data:
                    self.frozen.set()
                if self.frozen.is_set():
                    continue  # swallowed: the partition
                sink.sendall(data)
