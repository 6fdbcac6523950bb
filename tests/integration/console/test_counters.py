"""The event counters: counted where the event commits, never making one transaction wait for another.

The concurrency tests use real threads, each with its own database
connection, and a hard deadline: a design that made the second transaction
wait for the first (one shared counter row upserted inside both) fails by
timing out, never by hanging the suite.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest
from django.db import connections, transaction

from django_jobretry import deadletters
from django_jobretry.console import counters
from django_jobretry.models import CounterEvent, EventCounter
from tests.factories import DeadLetterFactory
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db(transaction=True)

#: Seconds a thread may take before the test fails instead of hanging.
DEADLINE = 10.0
RECORD = jobs.record.name


def total(event: str, task: str = RECORD, queue: str = "default") -> int:
    return counters.totals().get((event, task, queue), 0)


def in_thread(work: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    """Run ``work`` on a thread of its own (so on a connection of its own); errors are collected."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def test_enqueue_appends_its_count_in_the_same_statement() -> None:
    jobs.record.enqueue("a")
    jobs.record.enqueue("b")
    jobs.other_queue.enqueue("c")
    jobs.record.bulk_enqueue([(("d",), {}), (("e",), {})])
    rows = list(
        EventCounter.objects.order_by("id").values_list("event", "task_name", "queue_name", "shard", "value")
    )
    assert rows == [
        ("enqueued", RECORD, "default", None, 1),
        ("enqueued", RECORD, "default", None, 1),
        ("enqueued", jobs.other_queue.name, "other", None, 1),
        ("enqueued", RECORD, "default", None, 2),
    ]
    assert total("enqueued") == 4


def test_a_fold_takes_rows_written_before_migration_0014_too() -> None:
    """Those carry their session's pid as the shard; the fold and the sums treat them alike."""
    EventCounter.objects.create(event="enqueued", task_name=RECORD, queue_name="default", shard=4242, value=5)
    jobs.record.enqueue("a")
    counters.flush(Counter())
    assert list(EventCounter.objects.values_list("event", "shard", "value")) == [("enqueued", 0, 6)]


def test_a_rolled_back_enqueue_counts_nothing() -> None:
    with transaction.atomic():
        jobs.record.enqueue("a")
        transaction.set_rollback(True)
    assert total("enqueued") == 0


def test_bulk_enqueue_counts_its_rows() -> None:
    jobs.record.bulk_enqueue([(("a",), {}), (("b",), {}), (("c",), {})])
    assert total("enqueued") == 3


def test_two_transactions_enqueueing_the_same_task_do_not_wait_for_each_other() -> None:
    first_enqueued, second_done, release_first = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with transaction.atomic():
            jobs.record.enqueue("first")
            first_enqueued.set()
            # Longer than the test's own deadline, which must fire first.
            assert release_first.wait(3 * DEADLINE), "the test never let the first transaction commit"

    def second() -> None:
        with transaction.atomic():
            jobs.record.enqueue("second")
        second_done.set()

    holder, holder_errors = in_thread(first)
    try:
        assert first_enqueued.wait(DEADLINE), "the first enqueue did not happen"
        other, other_errors = in_thread(second)
        # The first transaction is still open here: the second must commit all the same.
        committed = second_done.wait(DEADLINE)
        assert committed, "the second transaction waited for the first one's counter row"
    finally:
        release_first.set()
        holder.join(DEADLINE)
    other.join(DEADLINE)
    assert holder_errors + other_errors == []
    assert total("enqueued") == 2


def test_a_flush_folds_committed_rows_and_skips_an_open_transaction_without_waiting() -> None:
    jobs.record.enqueue("committed")
    open_enqueued, release = threading.Event(), threading.Event()

    def open_transaction() -> None:
        with transaction.atomic():
            jobs.record.enqueue("open")
            open_enqueued.set()
            assert release.wait(3 * DEADLINE)

    holder, errors = in_thread(open_transaction)
    try:
        assert open_enqueued.wait(DEADLINE)
        flushed = threading.Event()

        def flush() -> None:
            counters.flush(Counter({("started", RECORD, "default"): 4}))
            flushed.set()

        flusher, flush_errors = in_thread(flush)
        assert flushed.wait(DEADLINE), "the flush waited for an open transaction's row"
        flusher.join(DEADLINE)
        assert not flush_errors, flush_errors
        assert dict(EventCounter.objects.filter(shard=0).values_list("event", "value")) == {
            "enqueued": 1,
            "started": 4,
        }
        assert total("enqueued") == 1  # the open transaction's row is not visible yet
    finally:
        release.set()
        holder.join(DEADLINE)
    assert not errors, errors
    assert total("enqueued") == 2
    counters.flush(Counter())
    assert list(EventCounter.objects.exclude(shard=0).values_list("event", flat=True)) == []
    assert EventCounter.objects.count() == 2  # one total per counter
    assert (total("enqueued"), total("started")) == (2, 4)


def test_requeue_and_discard_count_in_their_own_transaction() -> None:
    requeued, discarded, kept = DeadLetterFactory.create_batch(3, task_name=RECORD, policy_name="three")
    deadletters.requeue(requeued.pk, actor="ops")
    deadletters.discard(discarded.pk, actor="ops")
    result = deadletters.requeue_many([kept.pk, discarded.pk], actor="ops")
    assert result.done == [kept.pk]
    assert (total("requeued"), total("discarded")) == (2, 1)
    with pytest.raises(deadletters.NotDead):
        deadletters.discard(discarded.pk)
    assert total("discarded") == 1


def test_the_tally_hands_its_counts_over_once_and_takes_back_a_failed_flush() -> None:
    tally = counters.Tally.empty()
    tally.add(CounterEvent.STARTED, RECORD, "default")
    tally.add(CounterEvent.STARTED, RECORD, "default")
    taken = tally.take()
    assert taken == Counter({("started", RECORD, "default"): 2})
    assert tally.take() == Counter()
    tally.put_back(taken)
    tally.add(CounterEvent.DEAD, RECORD, "default")
    counters.flush(tally.take())
    assert (total("started"), total("dead")) == (2, 1)


def test_a_fold_takes_at_most_its_limit_and_the_sums_never_change() -> None:
    for key in "abc":
        jobs.record.enqueue(key)
    assert EventCounter.objects.filter(shard__isnull=True).count() == 3
    counters.flush(Counter(), fold=2)
    assert EventCounter.objects.filter(shard__isnull=True).count() == 1
    assert total("enqueued") == 3
    counters.flush(Counter(), fold=2)
    assert list(EventCounter.objects.values_list("shard", "value")) == [(0, 3)]
