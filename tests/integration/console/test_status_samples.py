"""Status samples: one a minute from the workers' heartbeats, however many (console/trends.py).

Real PostgreSQL throughout: the heartbeat threads run for real, each on its
own connection, with a scripted number of beats (as in test_heartbeat.py)
and a hard deadline; a sampling statement fails because its table is really
gone. The dashboard's charts of these samples are in test_dashboard.py, the
statement's plan in test_status_plans.py.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.db.models.functions import Now

from django_jobretry import console
from django_jobretry.console import trends
from django_jobretry.jobs.claimed import ClaimedJob
from django_jobretry.models import Job, StatusSample
from django_jobretry.worker.heartbeat import Heartbeat
from django_jobretry.worker.lifecycle import Shift, WorkerOptions
from tests.attempts import LEASE, OWNER, claim_one
from tests.factories import DeadLetterFactory, JobFactory, StatusSampleFactory
from tests.integration.console.test_workers_table import me
from tests.integration.worker.test_heartbeat import Beats
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db(transaction=True)

#: Seconds a heartbeat thread may take for its scripted beats.
DEADLINE = 30


#: The counts the ``incident`` fixture leaves, as a sample stores them.
INCIDENT = (2, 3, 1, 2, console.COUNT_LIMIT)


def db_minute() -> datetime:
    """The minute the database clock is in: the bucket take() writes (it truncates statement_timestamp())."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT date_trunc('minute', statement_timestamp())")
        minute: datetime = cursor.fetchone()[0]
        return minute


def next_minute_sampled(taken: trends.Taken) -> datetime:
    """The minute after ``taken``'s, sampled by another worker with the incident's counts.

    A test's next take() then falls in a sampled minute whether or not the
    clock turns a minute in between: the tests do not choose when they run.
    """
    assert taken.taken_at is not None
    ahead = taken.taken_at + timedelta(minutes=1)
    StatusSampleFactory.create(taken_at=ahead, ready=2, retrying=3, running=1, dead=2)
    return ahead


def sampled() -> list[tuple[int | None, int, int, int, int]]:
    return list(
        StatusSample.objects.order_by("taken_at").values_list(
            "ready", "retrying", "running", "dead", "count_limit"
        )
    )


def minutes() -> list[datetime]:
    return list(StatusSample.objects.order_by("taken_at").values_list("taken_at", flat=True))


class Together:
    """A stop event shared by heartbeat threads: every beat waits for all of them, ``count`` times."""

    def __init__(self, threads: int, count: int) -> None:
        self.barrier = threading.Barrier(threads, timeout=DEADLINE)
        self.beats: dict[int, Beats] = {}  # thread ident -> Beats
        self.count = count

    def wait(self, timeout: float | None = None) -> bool:
        self.barrier.wait()  # both threads sample at the same instant
        beats = self.beats.setdefault(threading.get_ident(), Beats(self.count))
        return beats.wait(timeout)


def heartbeats(
    count: int, *worker_ids: str, running: Callable[[], Sequence[ClaimedJob]] = list
) -> list[Heartbeat]:
    """Heartbeat threads of registered workers, beating together ``count`` times, then stopped."""
    stop = Together(len(worker_ids), count)
    threads = [
        Heartbeat(
            worker_id=worker_id,
            running=running,
            lease_seconds=LEASE,
            every=0,
            stop=stop,  # type: ignore[arg-type]
            shift=Shift(me(worker_id), WorkerOptions(), threading.Event()),
        )
        for worker_id in worker_ids
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=DEADLINE)
        assert not thread.is_alive(), "a heartbeat thread did not stop after its beats"
    return threads


@pytest.fixture
def incident() -> None:
    """2 ready (never attempted), 3 retrying, 1 running, 2 dead letters."""
    JobFactory.create_batch(2)
    JobFactory.create_batch(3, retrying=True)
    JobFactory.create(running=True)
    DeadLetterFactory.create_batch(2)


@pytest.mark.usefixtures("incident")
class TestTaking:
    def test_a_sample_counts_like_the_dashboard(self) -> None:
        taken = trends.take_sample()
        assert taken.taken_at is not None
        assert (taken.taken_at.second, taken.taken_at.microsecond) == (0, 0)
        assert sampled() == [INCIDENT]

    def test_a_second_call_in_the_same_minute_writes_nothing(self) -> None:
        first = trends.take_sample()
        ahead = next_minute_sampled(first)
        JobFactory.create(retrying=True)
        assert trends.take_sample() == trends.Taken(None, 0)
        assert minutes() == [first.taken_at, ahead]
        assert sampled() == [INCIDENT, INCIDENT]  # the minute's first count stays, whichever it was

    def test_two_workers_beating_together_write_one_sample_a_minute(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.DEBUG, logger="django_jobretry")
        before = db_minute()
        heartbeats(5, f"{OWNER}-a", f"{OWNER}-b")
        after = db_minute()
        # The beats took one database minute, or more when the clock turned between them:
        # one sample in each minute they beat in, never two in one.
        taken = minutes()
        assert taken
        assert all(before <= minute <= after for minute in taken)
        assert sampled() == [INCIDENT] * len(taken)
        assert not [r for r in caplog.records if "status sample" in r.getMessage()]


class TestLimits:
    def test_counts_past_the_limit_are_stored_as_limit_plus_one(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(console, "COUNT_LIMIT", 2)
        JobFactory.create_batch(5)
        JobFactory.create(retrying=True)
        DeadLetterFactory.create_batch(3)
        trends.take_sample()
        assert sampled() == [(3, 1, 0, 3, 2)]  # 4 never attempted: "2+"; 3 dead: "2+"

    def test_ready_is_unknown_when_more_are_retrying_than_the_limit(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(console, "COUNT_LIMIT", 2)
        JobFactory.create_batch(3, retrying=True)
        JobFactory.create()
        trends.take_sample()
        assert sampled() == [(None, 3, 0, 0, 2)]

    def test_the_database_refuses_a_count_past_its_limit(self) -> None:
        from django.db import IntegrityError

        with pytest.raises(IntegrityError):
            StatusSampleFactory.create(count_limit=5, retrying=7)


class TestPruning:
    def test_the_writer_of_a_minute_deletes_samples_older_than_the_retention(self) -> None:
        kept_days = trends.SAMPLES_KEPT.days
        StatusSampleFactory.create(minutes_ago=(kept_days * 24 + 1) * 60)
        StatusSampleFactory.create(minutes_ago=kept_days * 24 * 60 + 5)
        recent = StatusSampleFactory.create(minutes_ago=(kept_days * 24 - 1) * 60)
        taken = trends.take_sample()
        assert taken.pruned == 2
        assert list(StatusSample.objects.order_by("taken_at").values_list("taken_at", flat=True)) == [
            recent.taken_at,
            taken.taken_at,
        ]

    def test_a_minute_already_sampled_prunes_nothing(self) -> None:
        next_minute_sampled(trends.take_sample())
        old = StatusSampleFactory.create(minutes_ago=trends.SAMPLES_KEPT.days * 24 * 60 + 60)
        assert trends.take_sample().pruned == 0
        assert StatusSample.objects.filter(taken_at=old.taken_at).exists()


@pytest.fixture
def samples_table_gone() -> Iterator[None]:
    """The samples table renamed away, as on a database not yet migrated; put back afterwards."""
    table = trends.SAMPLES
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_away")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table}_away RENAME TO {table}")


@pytest.mark.usefixtures("samples_table_gone")
def test_a_failing_sample_is_logged_once_and_the_leases_are_still_extended(
    caplog: pytest.LogCaptureFixture,
) -> None:
    jobs.record.enqueue("beat")
    job = claim_one()
    Job.objects.filter(id=job.id).update(lease_expires_at=Now() + timedelta(seconds=1))
    caplog.set_level(logging.DEBUG, logger="django_jobretry")
    heartbeats(4, OWNER, running=lambda: [job])
    failures = [r for r in caplog.records if r.getMessage().startswith("could not take the status sample")]
    assert [r.levelno for r in failures] == [logging.WARNING] + [logging.DEBUG] * 4  # first beat + 4
    assert failures[0].sqlstate == "42P01"  # type: ignore[attr-defined]  # undefined_table
    # The leases were extended at each beat all the same, and the worker's row was written.
    assert Job.objects.filter(id=job.id, lease_expires_at__gt=Now() + timedelta(seconds=LEASE / 2)).exists()


@pytest.mark.django_db
def test_taken_inside_a_transaction_the_planner_settings_are_put_back() -> None:
    """A released savepoint keeps SET LOCAL: a caller's later statements must not plan without scans."""
    trends.take_sample()
    assert StatusSample.objects.count() == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('enable_seqscan'), current_setting('enable_bitmapscan')")
        assert cursor.fetchone() == ("on", "on")
