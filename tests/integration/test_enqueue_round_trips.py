"""Enqueue is one round trip in autocommit, and its wake-up still follows the caller's transaction.

A real LISTEN session on its own connection watches what workers would
receive. Ordering, not timing, proves "not before commit": PostgreSQL
delivers notifications in commit order, so a marker committed by a third
session while the caller's transaction is open must arrive first.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

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


def test_bulk_enqueue_is_one_statement_one_wake_up_and_keeps_the_order(listener: psycopg.Connection) -> None:
    calls = [((f"k{i}",), {"n": i}) for i in range(300)]
    with CaptureQueriesContext(connection) as queries:
        created = jobs.record.bulk_enqueue(calls)
    assert len(queries) == 1, [q["sql"][:200] for q in queries]
    assert [(job.args, job.kwargs) for job in created] == [([f"k{i}"], {"n": i}) for i in range(300)]
    stored = {job.pk: (job.args, job.kwargs, job.run_at) for job in Job.objects.all()}
    assert stored == {job.pk: (job.args, job.kwargs, job.run_at) for job in created}
    assert [job.pk for job in created] == sorted(job.pk for job in created)
    mark("after-bulk")
    assert received(listener, 2) == ["default", "after-bulk"]  # one NOTIFY for 300 jobs


@pytest.mark.parametrize("run_after", [None, timedelta(minutes=5), datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)])
def test_the_fast_insert_stores_what_django_save_would(run_after: datetime | timedelta | None) -> None:
    """services/job_insert.py builds its statements once; a model default changed later must not drift."""
    definition = jobs.takes_anything.using(run_after=run_after, priority=7)
    fast = definition.enqueue("k", n=1)
    [bulk] = definition.bulk_enqueue([(("k",), {"n": 1})])
    saved = Job(
        task_name=fast.task_name,
        queue_name=fast.queue_name,
        policy_name=fast.policy_name,
        priority=7,
        args=["k"],
        kwargs={"n": 1},
        max_attempts=fast.max_attempts,
    )
    if isinstance(run_after, datetime):
        saved.run_at = run_after
    saved.save()
    skip = {"id", "run_at", "enqueued_at"}
    rows = [
        {
            f.attname: getattr(Job.objects.get(pk=pk), f.attname)
            for f in Job._meta.concrete_fields
            if f.attname not in skip
        }
        for pk in (fast.pk, bulk.pk, saved.pk)
    ]
    assert rows[0] == rows[1] == rows[2]
    stored = {job.pk: job.run_at for job in Job.objects.all()}
    assert (fast.run_at, bulk.run_at) == (stored[fast.pk], stored[bulk.pk])
    if run_after is None:
        assert fast.run_at <= bulk.run_at
    elif isinstance(run_after, timedelta):  # the database clock plus the delay
        for job in (fast, bulk):
            assert job.run_at - job.enqueued_at == run_after
    else:
        assert fast.run_at == bulk.run_at == run_after
