"""The partition relay (chaos/relay.py) against a real TCP echo server on 127.0.0.1.

The relay is what the partition faults and their acceptance tests rely on,
so its own promises are checked with real sockets: bytes flow in pass,
none in blackhole while every socket stays open, the held bytes arrive in
order at the heal, a reset heal resets, new connections wait out a
blackhole, latency and stalls delay without losing or reordering a byte.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from chaos.relay import Relay


@pytest.fixture
def echo() -> Iterator[int]:
    """A TCP echo server on 127.0.0.1; its port."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(ConnectionResetError):  # the relay resets at the end of a test
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


@pytest.fixture
def relay(echo: int) -> Iterator[Relay]:
    relay = Relay("127.0.0.1", echo, seed=1).start()
    yield relay
    relay.close()


def connect(relay: Relay, timeout: float = 2.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", relay.port), timeout=timeout)


def receive(sock: socket.socket, size: int) -> bytes:
    """Exactly ``size`` bytes (the socket's timeout is the deadline)."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def nothing_arrives(sock: socket.socket, seconds: float) -> bool:
    """True when no byte and no close arrives within ``seconds`` (the socket stays open)."""
    sock.settimeout(seconds)
    try:
        sock.recv(1)
    except TimeoutError:
        return True
    return False


def test_bytes_flow_both_ways_in_pass(relay: Relay) -> None:
    with connect(relay) as sock:
        sock.sendall(b"hello")
        assert receive(sock, 5) == b"hello"
    assert relay.stats.connections == 1
    assert (relay.stats.upstream_bytes, relay.stats.downstream_bytes) == (5, 5)


def test_a_blackhole_keeps_the_socket_open_forwards_nothing_and_the_heal_delivers_in_order(
    relay: Relay,
) -> None:
    with connect(relay) as sock:
        sock.sendall(b"before")
        assert receive(sock, 6) == b"before"
        relay.blackhole()
        sock.sendall(b"held-1")
        sock.sendall(b"held-2")
        assert nothing_arrives(sock, 1.0)
        assert relay.stats.upstream_bytes == 6  # nothing of the held bytes reached the server
        assert relay.stats.open == 1
        relay.heal()
        sock.settimeout(2)
        assert receive(sock, 12) == b"held-1held-2"


def test_a_close_does_not_cross_a_blackhole(relay: Relay) -> None:
    with connect(relay) as sock:
        sock.sendall(b"x")
        assert receive(sock, 1) == b"x"
        relay.blackhole()
        sock.shutdown(socket.SHUT_WR)  # our FIN is held: the server never sees it, so never closes
        assert nothing_arrives(sock, 0.5)
        relay.heal()
        sock.settimeout(2)
        assert sock.recv(1) == b""  # delivered at the heal: the server closed in turn


def test_a_new_connection_gets_no_upstream_until_the_heal(relay: Relay) -> None:
    relay.blackhole()
    with connect(relay) as sock:  # accepted locally, as a kernel does for a listening socket
        sock.sendall(b"startup")
        assert nothing_arrives(sock, 0.5)
        assert relay.stats.upstream_bytes == 0
        relay.heal()
        sock.settimeout(2)
        assert receive(sock, 7) == b"startup"


def test_a_reset_heal_resets_the_connections_of_the_partition_and_accepts_new_ones(relay: Relay) -> None:
    with connect(relay) as old:
        relay.blackhole()
        old.sendall(b"lost")
        relay.heal(reset=True)
        old.settimeout(2)
        with pytest.raises(ConnectionResetError):
            old.recv(1)
    assert relay.stats.resets == 1
    with connect(relay) as new:
        new.sendall(b"again")
        assert receive(new, 5) == b"again"
    assert relay.stats.upstream_bytes == 5  # the held "lost" never reached the server


def test_latency_delays_each_chunk_without_losing_or_reordering(relay: Relay) -> None:
    relay.shape(delay=0.15)
    with connect(relay) as sock:
        started = time.monotonic()
        sock.sendall(b"ping")
        assert receive(sock, 4) == b"ping"
        # Both ways: at least two one-way delays.
        assert time.monotonic() - started >= 0.3
        payload = bytes(range(256)) * 400
        sock.sendall(payload)
        assert receive(sock, len(payload)) == payload


def test_stalls_hold_up_the_stream_behind_them_and_lose_nothing(relay: Relay) -> None:
    relay.shape(loss=1.0, stall=0.1)
    with connect(relay) as sock:
        started = time.monotonic()
        for n in range(5):
            sock.sendall(b"%d," % n)
        assert receive(sock, 10) == b"0,1,2,3,4,"
        assert time.monotonic() - started >= 0.2  # one stall each way at least


def test_a_relay_to_a_socket_directory_gives_workers_a_tcp_url_to_itself() -> None:
    relay = Relay.to("postgresql://postgres@/jobretry_chaos?host=/tmp/jr-x&sslmode=disable")
    relay.port = 40001  # as start() would set it

    assert relay.upstream == ("/tmp/jr-x", 5432)
    assert (
        relay.url_for("postgresql://postgres@/jobretry_chaos?host=/tmp/jr-x&sslmode=disable")
        == "postgresql://postgres@127.0.0.1:40001/jobretry_chaos?sslmode=disable"
    )


def test_a_relay_to_a_host_keeps_the_credentials_and_the_database() -> None:
    relay = Relay.to("postgres://u:p%40ss@db.example:6543/app", bind="10.231.0.1")
    relay.port = 40002

    assert relay.upstream == ("db.example", 6543)
    assert (
        relay.url_for("postgres://u:p%40ss@db.example:6543/app") == "postgres://u:p%40ss@10.231.0.1:40002/app"
    )
