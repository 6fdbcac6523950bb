"""The watchdog bounds a guarded connection's round trips: a lost answer is cut, a slow one is not.

The connections are real, to the test database; the lost answers are real
too: tests/forwarder.py keeps the sockets open and drops every byte, so
the kernel sees nothing wrong and only the watchdog can end the wait.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection as django_connection

from django_jobretry.worker import watchdog
from tests.forwarder import Forwarder, database_url, forwarder
from tests.processes import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

WORKER = "test-host:1:watchdog"


@pytest.fixture
def dog() -> Iterator[watchdog.Watchdog]:
    started = watchdog.start(WORKER)
    yield started
    watchdog.stop()
    started.join(timeout=5)


def query_in_thread(conn: psycopg.Connection[Any], sql: str) -> tuple[threading.Thread, list[object]]:
    """Run ``sql`` on ``conn`` in a thread; the list gets its rows, or the error it raised."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(conn.execute(sql).fetchall())
        except psycopg.Error as error:
            result.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def no_answer_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "outcome", None) == "database_no_answer"]


def connect_through(relay: Forwarder) -> psycopg.Connection[Any]:
    conn = psycopg.connect(database_url(relay), autocommit=True)
    watchdog.guard(conn, "default")
    return conn


def test_a_statement_whose_answer_is_lost_fails_and_the_line_names_database_address_and_worker(
    dog: watchdog.Watchdog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="django_jobretry")
    with forwarder() as relay, connect_through(relay) as conn:
        assert conn.execute("SELECT 1").fetchall() == [(1,)]
        relay.blackhole()
        thread, result = query_in_thread(conn, "SELECT 2")
        # A deadline, not a measure: how soon a lost answer is cut (about 5 s, docs/worker.md) is
        # measured and bounded by `python -m chaos --size partition` (chaos/partition.py).
        thread.join(timeout=30)
        assert not thread.is_alive(), "the statement still waits for an answer that is not coming"
        [error] = result
        assert isinstance(error, psycopg.OperationalError)
        assert conn.broken
    [line] = no_answer_lines(caplog)
    message = line.getMessage()
    assert f"database 'default' at 127.0.0.1:{relay.port}" in message, message
    assert WORKER in message, message
    assert "a new connection failed too" in message, message
    assert (line.database, line.worker) == ("default", WORKER)  # type: ignore[attr-defined]


def test_a_statement_lost_before_a_heal_is_cut_although_the_database_answers_again(
    dog: watchdog.Watchdog, caplog: pytest.LogCaptureFixture
) -> None:
    """The heal does not bring dropped bytes back: the server shows the session idle; no answer will come."""
    caplog.set_level(logging.WARNING, logger="django_jobretry")
    with forwarder() as relay, connect_through(relay) as conn:
        relay.blackhole()
        thread, result = query_in_thread(conn, "SELECT 2")
        wait_until(lambda: relay.dropped > 0, timeout=10, what="the statement to be dropped")
        relay.heal()
        thread.join(timeout=20)
        assert not thread.is_alive(), "the lost statement still waits"
        [error] = result
        assert isinstance(error, psycopg.OperationalError)
    [line] = no_answer_lines(caplog)
    assert "its server session is idle, so the statement or its answer was lost" in line.getMessage()


def test_a_slow_statement_of_a_reachable_database_is_not_cut(
    dog: watchdog.Watchdog, caplog: pytest.LogCaptureFixture
) -> None:
    """Past SLOW_AFTER a probe connects, so the statement waits on: slow (a lock, a load), not lost."""
    caplog.set_level(logging.WARNING, logger="django_jobretry")
    seconds = watchdog.SLOW_AFTER + 1.5
    with forwarder() as relay, connect_through(relay) as conn:
        thread, result = query_in_thread(conn, f"SELECT pg_sleep({seconds}), 3")
        thread.join(timeout=30)
        assert not thread.is_alive()
        assert result == [[("", 3)]]
        assert not conn.broken
    assert no_answer_lines(caplog) == []


def test_a_stopping_worker_cuts_what_still_waits_when_its_grace_is_over(
    dog: watchdog.Watchdog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="django_jobretry")
    with forwarder() as relay, connect_through(relay) as conn:
        watchdog.give_up_at(time.monotonic() + 0.5)
        thread, result = query_in_thread(conn, SLEEPS)
        thread.join(timeout=15)
        assert not thread.is_alive(), "the statement outlived the grace period"
        [error] = result
        assert isinstance(error, psycopg.OperationalError)
    [line] = no_answer_lines(caplog)
    assert "the worker's grace period is over" in line.getMessage()
    # The server still runs the statement (until its statement_timeout): end it, as an operator would.
    with django_connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE query = %s AND pid <> pg_backend_pid()",
            [SLEEPS],
        )


SLEEPS = "SELECT pg_sleep(60)"
