"""``Worker(...).run()`` in this process, in burst mode, with a query budget per job.

The process tests (test_worker_processes.py) prove the worker's semantics
under kills and pauses; this one watches the main loop's own queries, so a
change that makes the claim loop pay a query per job more (an N+1) fails
here. The main loop runs on this test's thread and connection, which is
what CaptureQueriesContext records; handlers run on runner threads with
connections of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import django
import pytest

from django_jobretry import signals
from django_jobretry.jobs.claimed import Succeeded, Written
from django_jobretry.jobs.record import Recorder
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.inprocess import run_burst
from tests.jobs_app import async_jobs, jobs
from tests.jobs_app.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("keep_signal_handlers")]

#: Round trips a run spends besides its per-job work: the worker session's
#: three timeouts, the first lease recovery (BEGIN, the statement, COMMIT)
#: and the last, empty claim that ends the burst.
FIXED_QUERIES = 7


def test_one_at_a_time_a_job_costs_one_round_trip() -> None:
    """At --concurrency 1 the success of a job and the claim of the next are one statement."""
    count = 30
    for index in range(count):
        jobs.record.enqueue(f"job-{index}")
    queries = run_burst(concurrency=1)
    assert Execution.objects.count() == count
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == count
    # The first claim is alone; each later one carries the previous job's success.
    assert sum("WITH done AS" in q for q in queries) == count, "\n".join(queries)
    assert len(queries) <= count + 1 + FIXED_QUERIES, "\n".join(queries)


def test_concurrent_claims_and_acks_are_batched() -> None:
    count = 60
    jobs.noop.bulk_enqueue([((), {})] * count)
    queries = run_burst(concurrency=10)
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == count
    # A claim waits for half the slots to be free, so each takes at least five
    # jobs while there are five to take; at the tail a few claims find nothing.
    claims = [q for q in queries if "picked AS (" in q]  # alone or with the successes
    assert claims, "\n".join(queries)
    assert len(claims) <= count // 5 + 10, "\n".join(claims)
    # Never more than a claim share and one ack per job (in practice acks are batched too).
    assert len(queries) <= 2 * count + FIXED_QUERIES, "\n".join(queries)


def test_a_fatal_failure_costs_one_fenced_write() -> None:
    jobs.fatal.enqueue("dies")
    jobs.record.enqueue("lives")
    queries = run_burst(concurrency=1)
    assert DeadLetter.objects.get().reason == "fatal"
    assert Job.objects.get().status == JobStatus.SUCCEEDED
    # The fatal job: its claim, then the fenced bury (no transaction of its own).
    # The other: its claim, and its ack with the last, empty claim.
    assert len(queries) <= 2 + 2 + FIXED_QUERIES, "\n".join(queries)


def test_a_retry_rides_on_the_next_claim() -> None:
    count = 10
    for index in range(count):
        jobs.flaky.enqueue(f"job-{index}", 1)  # fails its first attempt, retried after 10 ms
    queries: list[str] = []
    while Job.objects.live().exists() and len(queries) < 50 * count:  # bursts until settled, bounded
        queries += run_burst(concurrency=1)
    assert list(Job.objects.values_list("status", "attempts").distinct()) == [(JobStatus.SUCCEEDED, 2)]
    # Every retry was written by the statement that also claimed (and acked), never alone.
    assert sum(q.count("retried AS (") for q in queries) == count, "\n".join(queries)
    assert not [q for q in queries if q.startswith("UPDATE") and "SET status = 'ready', run_at" in q]


def test_the_budget_catches_a_planted_query_per_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: one extra statement per success must break the budget above."""
    announce = Recorder._announce_successes

    def one_more_query_per_job(self: Recorder, finished: Sequence[Succeeded], recorded: Written) -> None:
        for outcome in finished:
            Job.objects.filter(pk=outcome.job.id).exists()
        announce(self, finished, recorded)

    monkeypatch.setattr(Recorder, "_announce_successes", one_more_query_per_job)
    # The budget assertion fails, listing the statements: the planted one among them.
    with pytest.raises(AssertionError, match=r"SELECT 1 AS \"a\" FROM \"django_jobretry_job\""):
        test_one_at_a_time_a_job_costs_one_round_trip()


needs_django_tasks = pytest.mark.skipif(
    django.VERSION < (6, 0), reason="django.tasks exists from Django 6.0 on"
)


@needs_django_tasks
def test_a_django_tasks_task_costs_what_a_job_costs() -> None:
    """``task_finished`` comes from the attempt's outcome: the main loop reads no row for it."""
    from django.tasks.signals import task_finished

    from tests.jobs_app import tasks

    count = 30
    enqueued = [tasks.flaky.enqueue(f"task-{index}", 0) for index in range(count)]
    sent: list[Any] = []

    def receive(sender: type, task_result: Any, **kwargs: Any) -> None:
        sent.append(task_result)

    task_finished.connect(receive, weak=False)
    try:
        queries = run_burst(concurrency=1)
    finally:
        task_finished.disconnect(receive)
    assert sum("WITH done AS" in q for q in queries) == count, "\n".join(queries)
    assert len(queries) <= count + 1 + FIXED_QUERIES, "\n".join(queries)
    # What was sent is what the backend reads back: status, value, finished_at (the database's), workers.
    assert sent == [tasks.flaky.get_result(result.id) for result in enqueued]


@needs_django_tasks
def test_the_task_budget_catches_the_old_re_read() -> None:
    """Negative control: ``task_finished`` relayed from ``job_succeeded`` by re-reading the row breaks it."""

    def re_read(sender: type, *, job_id: int, **kwargs: Any) -> None:
        Job.objects.filter(id=job_id).first()

    signals.job_succeeded.connect(re_read, weak=False)
    try:
        with pytest.raises(AssertionError, match=r'WHERE "django_jobretry_job"\."id" = \d+ ORDER BY'):
            test_a_django_tasks_task_costs_what_a_job_costs()
    finally:
        signals.job_succeeded.disconnect(re_read)


def test_coroutine_jobs_are_claimed_for_the_event_loop_in_one_statement() -> None:
    """The ordinary claim brings the first; one claim by task name brings the rest the loop has room for."""
    count = 60
    async_jobs.noop.bulk_enqueue([((), {})] * count)
    queries = run_burst(concurrency=1, async_concurrency=100)
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == count
    by_task = [q for q in queries if "picked AS (" in q and "task_name = ANY(" in q]
    assert len(by_task) == 1, "\n".join(by_task)
    # The successes ride on the ordinary claims, batched as they come: never more than one per job.
    assert len(queries) <= count + 2 + FIXED_QUERIES, "\n".join(queries)


def test_plain_jobs_beside_registered_coroutine_jobs_pay_one_look_for_them(settings: Any) -> None:
    """With the event loop on, a queue of plain jobs costs what it did, plus the first pass's look.

    Looking again is due only at a poll while the threads are all busy: with a
    poll longer than the test, only the first pass's look is left, not one per job.
    """
    settings.JOBRETRY = {**settings.JOBRETRY, "POLL_SECONDS": 300.0}
    count = 30
    for index in range(count):
        jobs.record.enqueue(f"job-{index}")
    queries = run_burst(concurrency=1, async_concurrency=100)
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == count
    by_task = [q for q in queries if "picked AS (" in q and "task_name = ANY(" in q]
    assert len(by_task) == 1, "\n".join(by_task)
    assert len(queries) <= count + 2 + FIXED_QUERIES, "\n".join(queries)
