"""A TCP relay per worker that can partition it from PostgreSQL without root.

A worker connects to ``127.0.0.1:<relay port>`` instead of the database;
the relay forwards each connection to the real server. The harness (or a
test) switches the relay, from any thread, between:

- **pass**: bytes flow both ways, shaped by ``shape()`` when asked;
- **blackhole**: every socket stays open and nothing crosses, in either
  direction, not even a close. Bytes read meanwhile are held, in order.
  New connections are accepted (the kernel completes the handshake of a
  listening socket anyway) but get no upstream connection until the heal,
  so libpq's ``connect_timeout`` is what ends them. This is Toxiproxy's
  "timeout" toxic, and what an application sees when a network drops
  packets while both hosts' TCP stacks are still willing to wait: nothing
  fails, nothing answers. Keepalives and ``tcp_user_timeout`` never fire
  on the worker's side (the relay acknowledges every byte): only the
  worker's own deadlines can notice. The kernel variant, where they do
  fire, is ``chaos/netns.py``;
- **heal**: back to pass. The held bytes are then delivered, as TCP's
  retransmissions would after a short partition; ``heal(reset=True)``
  instead resets every connection opened before it (RST both ways, held
  bytes discarded), as a peer sees once the other side's TCP gave up.

"Loss" is modelled the way TCP shows it to the application: no byte of a
stream ever goes missing (a dropped byte would corrupt the protocol, which
no network does to a TCP stream), but a lost segment stalls its stream
until the retransmission arrives. With ``shape(loss=p, stall=s)`` each
chunk is, with probability ``p``, delivered ``s`` seconds late, and
everything behind it waits (head-of-line blocking). ``shape(delay=d,
jitter=j)`` adds ``d`` seconds (plus up to ``j``) of one-way latency to
each chunk, in order, without limiting throughput. Flapping is the harness
alternating ``blackhole()`` and ``heal()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit, urlunsplit

#: Linger on, timeout 0: close() sends RST instead of FIN.
RST = struct.pack("ii", 1, 0)


@dataclass
class Shape:
    """One-way latency and loss-like stalls applied to every chunk while passing."""

    delay: float = 0.0
    jitter: float = 0.0
    loss: float = 0.0
    stall: float = 0.0


@dataclass
class Stats:
    """Counters for tests and the report (read from other threads; ints only)."""

    connections: int = 0
    open: int = 0
    upstream_bytes: int = 0
    downstream_bytes: int = 0
    resets: int = 0


@dataclass(eq=False)
class _Link:
    """One client connection and, once passing, its upstream connection."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class Relay:
    """<bind>:<port> -> upstream (TCP or PostgreSQL's Unix socket); switched from any thread."""

    def __init__(
        self, upstream_host: str, upstream_port: int, *, seed: int = 0, bind: str = "127.0.0.1"
    ) -> None:
        #: A host name or address, or a directory holding PostgreSQL's Unix socket.
        self.upstream = (upstream_host, upstream_port)
        self.bind = bind
        self.stats = Stats()
        self.port = 0
        self._shape = Shape()
        self._rng = random.Random(seed)  # noqa: S311 - schedules stalls, not secrets
        self._links: set[_Link] = set()
        self._passing = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # made by start(), closed by close()
        self._thread: threading.Thread | None = None

    def start(self) -> Relay:
        """Listen on a free port (``self.port``) of ``self.bind`` in a thread of its own; passing."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-relay", daemon=True)
        self._thread.start()
        self._call(self._listen())
        return self

    def blackhole(self) -> None:
        self._call(self._set(passing=False))

    def heal(self, *, reset: bool = False) -> None:
        self._call(self._set(passing=True, reset=reset))

    def shape(self, delay: float = 0.0, jitter: float = 0.0, loss: float = 0.0, stall: float = 0.0) -> None:
        self._shape = Shape(delay, jitter, loss, stall)

    @classmethod
    def to(cls, database_url: str, *, seed: int = 0, bind: str = "127.0.0.1") -> Relay:
        """A relay to the server of ``database_url`` (a host, or a socket directory in ``?host=``)."""
        parts = urlsplit(database_url)
        query = parse_qs(parts.query)
        host = query.get("host", [parts.hostname or "127.0.0.1"])[0]
        port = parts.port or int(query.get("port", ["5432"])[0])
        return cls(host, port, seed=seed, bind=bind)

    def url_for(self, database_url: str) -> str:
        """``database_url`` with its host and port replaced by this relay's."""
        parts = urlsplit(database_url)
        credentials = parts.netloc.rpartition("@")[0]
        netloc = f"{credentials}@{self.bind}:{self.port}" if credentials else f"{self.bind}:{self.port}"
        query = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("host", "port")]
        return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query)))

    @property
    def passing(self) -> bool:
        return self._passing.is_set()

    def close(self) -> None:
        """Reset every connection, stop listening, end the thread."""
        if self._loop is None or self._thread is None:
            return
        if self._thread.is_alive():
            self._call(self._close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        self._loop.close()

    def _call(self, coroutine: Coroutine[Any, Any, None]) -> None:
        if self._loop is None:
            coroutine.close()
            raise RuntimeError("the relay is not started")
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    async def _listen(self) -> None:
        self._passing.set()
        self._server = await asyncio.start_server(self._serve, self.bind, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _set(self, *, passing: bool, reset: bool = False) -> None:
        if reset:
            for link in list(self._links):
                self._reset(link)
        if passing:
            self._passing.set()
        else:
            self._passing.clear()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            self._reset(link)
        self._passing.set()  # wakes the tasks waiting to pass, which then find their sockets closed
        # End every connection's task before the loop stops, so none is destroyed pending.
        others = asyncio.all_tasks() - {asyncio.current_task()}
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def _reset(self, link: _Link) -> None:
        """RST both sockets of ``link`` now: what is held is discarded."""
        self.stats.resets += 1
        for writer in (link.client, link.upstream):
            if writer is None:
                continue
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):  # already closed: nothing to reset
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RST)
            writer.transport.abort()
        for task in link.tasks:
            task.cancel()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        link = _Link(client_writer)
        self._links.add(link)
        self.stats.connections += 1
        self.stats.open += 1
        up: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        down: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        try:
            link.tasks.append(asyncio.ensure_future(self._read(client_reader, up)))
            await self._passing.wait()  # no upstream connection across a partition
            if client_writer.transport.is_closing():
                return
            try:
                upstream_reader, link.upstream = await self._connect()
            except OSError:
                self._reset(link)  # upstream refused: the client sees a reset, as it would directly
                return
            link.tasks += [
                asyncio.ensure_future(self._read(upstream_reader, down)),
                asyncio.ensure_future(self._write(up, link.upstream, upstream=True)),
                asyncio.ensure_future(self._write(down, client_writer, upstream=False)),
            ]
            await asyncio.gather(*link.tasks[2:], return_exceptions=True)
        finally:
            for task in link.tasks:
                task.cancel()
            for writer in (client_writer, link.upstream):
                if writer is not None:
                    writer.transport.abort()
            self._links.discard(link)
            self.stats.open -= 1

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host, port = self.upstream
        if host.startswith("/"):
            return await asyncio.open_unix_connection(f"{host}/.s.PGSQL.{port}")
        return await asyncio.open_connection(host, port)

    async def _read(self, reader: asyncio.StreamReader, queue: asyncio.Queue[tuple[float, bytes]]) -> None:
        """Everything read, stamped with its arrival; b"" for the end of the stream (or an error)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                data = await reader.read(65536)
            except OSError:
                data = b""
            queue.put_nowait((loop.time(), data))
            if not data:
                return

    async def _write(
        self, queue: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter, *, upstream: bool
    ) -> None:
        """Deliver in order, each chunk at arrival + latency (+ a stall), only while passing."""
        loop = asyncio.get_running_loop()
        ready = 0.0  # when the previous chunk went out: a stall holds up what follows it
        while True:
            arrived, data = await queue.get()
            shape = self._shape
            due = max(arrived + shape.delay + self._rng.uniform(0, shape.jitter), ready)
            if shape.loss and self._rng.random() < shape.loss:
                due = max(due, loop.time()) + shape.stall
            while True:
                await self._passing.wait()
                wait = due - loop.time()
                if wait <= 0 and self._passing.is_set():
                    break
                await asyncio.sleep(max(wait, 0))
            ready = loop.time()
            if not data:
                writer.close()  # FIN after the last byte, as the sender closed
                return
            # Counted before the bytes can arrive, so whoever received them sees them counted.
            if upstream:
                self.stats.upstream_bytes += len(data)
            else:
                self.stats.downstream_bytes += len(data)
            writer.write(data)
            await writer.drain()
