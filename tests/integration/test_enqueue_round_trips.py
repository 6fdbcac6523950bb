"""Enqueue is one round trip in autocommit, and its wake-up still follows the caller's transaction.

A real LISTEN session on its own connection watches what workers would
receive. Ordering, not timing, proves "not before commit": PostgreSQL
delivers notifications in commit order, so a marker committed by a third
session while the caller's transaction is open must arrive first.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from django_jobretry.models import Job
from django_jobretry.services.enqueue import CHANNEL
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db(transaction=True)

#: Seconds a notification may take to arrive before the test fails instead of hanging.
DEADLINE = 10.0


@pytest.fixture
def listener() -> Iterator[psycopg.Connection]:
    session = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    session.execute(f"LISTEN {CHANNEL}")
    yield session
    session.close()


def received(session: psycopg.Connection, count: int) -> list[str]:
    """The payloads of the next ``count`` notifications, failing at DEADLINE."""
    payloads = [n.payload for n in session.notifies(timeout=DEADLINE, stop_after=count)]
    assert len(payloads) == count, f"expected {count} notifications, got {payloads}"
    return payloads


def mark(text: str) -> None:
    """A notification committed by a third session, now."""
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        other.execute("SELECT pg_notify(%s, %s)", [CHANNEL, text])


def test_autocommit_enqueue_is_one_statement_and_wakes_its_queue(listener: psycopg.Connection) -> None:
    with CaptureQueriesContext(connection) as queries:
        job = jobs.other_queue.enqueue("k")
    assert len(queries) == 1, [q["sql"] for q in queries]
    assert received(listener, 1) == ["other"]
    stored = Job.objects.get(pk=job.pk)
    assert (job.run_at, job.enqueued_at, job.queue_name) == (stored.run_at, stored.enqueued_at, "other")
    assert job.run_at.tzinfo is not None
    assert not job._state.adding


def test_inside_a_transaction_the_wake_up_waits_for_commit(listener: psycopg.Connection) -> None:
    with transaction.atomic():
        job = jobs.record.enqueue("k")
        mark("before-commit")
    mark("after-commit")
    assert received(listener, 3) == ["before-commit", "default", "after-commit"]
    assert Job.objects.filter(pk=job.pk).exists()


def test_a_rolled_back_enqueue_wakes_no_one(listener: psycopg.Connection) -> None:
    def failing_request() -> None:
        with transaction.atomic():
            jobs.record.enqueue("k")
            raise RuntimeError("the request failed")

    with pytest.raises(RuntimeError):
        failing_request()
    mark("after-rollback")
    assert received(listener, 1) == ["after-rollback"]
    assert not Job.objects.exists()


def test_a_keyed_enqueue_is_one_statement_too_and_keeps_the_outer_transaction(
    listener: psycopg.Connection,
) -> None:
    keyed = jobs.record.using(unique_key="order-7")
    with CaptureQueriesContext(connection) as queries:
        first = keyed.enqueue("k")
    assert len(queries) == 1, [q["sql"] for q in queries]
    with transaction.atomic():
        again = keyed.enqueue("k")  # the unique index refuses it; the savepoint keeps the transaction
        assert Job.objects.count() == 1
    assert again.pk == first.pk
    assert received(listener, 1) == ["default"]
