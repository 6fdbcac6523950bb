"""Enqueue is one round trip in autocommit, and its wake-up still follows the caller's transaction.

A real LISTEN session on its own connection watches what workers would
receive. Ordering, not timing, proves "not before commit": PostgreSQL
delivers notifications in commit order, so a marker committed by a third
session while the caller's transaction is open must arrive first.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db import connection, transaction
from django.db.models.signals import post_init
from django.test.utils import CaptureQueriesContext

from django_jobretry.jobs.insert import CHANNEL
from django_jobretry.models import Job
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db(transaction=True)

#: Seconds a notification may take to arrive before the test fails instead of hanging.
DEADLINE = 10.0


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
        created = jobs.takes_anything.bulk_enqueue(calls)
    assert len(queries) == 1, [q["sql"][:200] for q in queries]
    assert [(job.args, job.kwargs) for job in created] == [([f"k{i}"], {"n": i}) for i in range(300)]
    stored = {job.pk: (job.args, job.kwargs, job.run_at) for job in Job.objects.all()}
    assert stored == {job.pk: (job.args, job.kwargs, job.run_at) for job in created}
    assert [job.pk for job in created] == sorted(job.pk for job in created)
    mark("after-bulk")
    assert received(listener, 2) == ["default", "after-bulk"]  # one NOTIFY for 300 jobs


@pytest.mark.parametrize("run_after", [None, timedelta(minutes=5), datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)])
def test_the_fast_insert_stores_what_django_save_would(run_after: datetime | timedelta | None) -> None:
    """jobs/insert.py builds its statements once; a model default changed later must not drift."""
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
    skip = {"id", "run_at", "run_after", "enqueued_at"}
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
    # run_after keeps the start time the enqueue gave (the same expression as run_at), or NULL.
    kept = {job.pk: job.run_after for job in Job.objects.all()}
    given = [stored[fast.pk], stored[bulk.pk]] if run_after is not None else [None, None]
    assert [kept[fast.pk], kept[bulk.pk]] == [fast.run_after, bulk.run_after] == given
    if run_after is None:
        assert fast.run_at <= bulk.run_at
    elif isinstance(run_after, timedelta):  # the database clock plus the delay
        for job in (fast, bulk):
            assert job.run_at - job.enqueued_at == run_after
    else:
        assert fast.run_at == bulk.run_at == run_after


def _as_stored(job: Job) -> dict[str, object]:
    return {f.attname: getattr(job, f.attname) for f in Job._meta.concrete_fields}


def test_the_returned_jobs_are_their_rows_field_by_field() -> None:
    """Jobs are copied from a prototype, not built by Model.__init__: every column must still match."""
    keyed = jobs.takes_anything.using(unique_key="k-1", priority=-3, queue_name="other")
    created = [
        keyed.enqueue(1, a=[2]),
        jobs.takes_anything.using(run_after=timedelta(seconds=30)).enqueue("x"),
        *jobs.takes_anything.using(priority=9).bulk_enqueue([((i,), {"i": [i]}) for i in range(3)]),
    ]
    for job in created:
        assert _as_stored(job) == _as_stored(Job.objects.get(pk=job.pk))
        assert not job._state.adding
        assert job._state.db == "default"
    assert len({id(job.errors) for job in created}) == len(created)  # no shared mutable default
    created[0].errors.append({"attempt": 1})
    assert created[1].errors == []


def test_definitions_that_differ_in_one_column_keep_their_own_statements() -> None:
    """The statements are kept per definition, with its columns written in: alternate two and compare."""
    low, high = jobs.takes_anything.using(priority=-5), jobs.takes_anything.using(priority=5)
    other = jobs.takes_anything.using(queue_name="other", policy="q2-two")
    made = [definition.enqueue(n) for n in range(2) for definition in (low, high, other)]
    made += [job for definition in (high, low) for job in definition.bulk_enqueue([((9,), {})])]
    stored = {
        job.pk: (job.priority, job.queue_name, job.policy_name, job.max_attempts) for job in Job.objects.all()
    }
    assert [stored[job.pk] for job in made] == [
        (-5, "default", "three", 3),
        (5, "default", "three", 3),
        (0, "other", "q2-two", 2),
    ] * 2 + [(5, "default", "three", 3), (-5, "default", "three", 3)]
    assert all(
        stored[job.pk] == (job.priority, job.queue_name, job.policy_name, job.max_attempts) for job in made
    )


def test_init_signals_still_fire_when_someone_listens() -> None:
    seen: list[Job] = []

    def on_post_init(sender: type[Job], instance: Job, **kwargs: object) -> None:
        seen.append(instance)

    post_init.connect(on_post_init, sender=Job)
    try:
        job = jobs.other_queue.enqueue("k")
        [bulk] = jobs.other_queue.bulk_enqueue([(("k",), {})])
    finally:
        post_init.disconnect(on_post_init, sender=Job)
    assert any(instance is job for instance in seen)
    assert any(instance is bulk for instance in seen)
    assert _as_stored(bulk) == _as_stored(Job.objects.get(pk=bulk.pk))
