"""The heartbeat thread: which misses are reported as a lost lease.

The thread runs for real, on its own connection; only the number of beats is
scripted (a stop event that lets a fixed number of beats through), so the
tests do not depend on timing.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from datetime import timedelta

import psycopg
import pytest
from django.db import connection as django_connection
from django.db.models.functions import Now

from django_jobretry.jobs import recovery
from django_jobretry.jobs.claimed import ClaimedJob, release, succeed
from django_jobretry.models import Job
from django_jobretry.worker.heartbeat import Heartbeat
from tests.attempts import LEASE, OWNER, claim_one
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db(transaction=True)


class Beats:
    """A stop event that lets ``count`` beats through, then stops the thread."""

    def __init__(self, count: int) -> None:
        self.left = count

    def wait(self, timeout: float | None = None) -> bool:
        self.left -= 1
        return self.left < 0


def beat(running: Callable[[], Sequence[ClaimedJob]], count: int) -> None:
    """Run a heartbeat thread for ``count`` beats, each asking ``running()`` once; fails after 30 s."""
    thread = Heartbeat(
        worker_id=OWNER,
        running=running,
        lease_seconds=LEASE,
        every=0,
        stop=Beats(count),  # type: ignore[arg-type]
    )
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the heartbeat thread did not stop after its beats"


def scripted(*steps: Callable[[], Sequence[ClaimedJob]]) -> Callable[[], Sequence[ClaimedJob]]:
    """A running() whose n-th call runs the n-th step (the last one repeats)."""
    calls = itertools.count()

    def running() -> Sequence[ClaimedJob]:
        return steps[min(next(calls), len(steps) - 1)]()

    return running


def lost_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "outcome", None) == "lease_lost"]


def test_a_job_finishing_between_two_beats_is_not_reported_lost(caplog: pytest.LogCaptureFixture) -> None:
    """The worker records the success, then forgets the job: a beat in between must not warn."""
    jobs.record.enqueue("beat")
    job = claim_one()

    def recorded_not_yet_forgotten() -> list[ClaimedJob]:
        assert succeed([job]) == {job.id}
        return [job]

    caplog.set_level(logging.WARNING, logger="django_jobretry")
    beat(scripted(lambda: [job], recorded_not_yet_forgotten, lambda: []), 4)
    assert lost_warnings(caplog) == []
    assert Job.objects.get(id=job.id).status == "succeeded"


def test_a_lost_lease_is_reported_once_and_no_longer_extended(caplog: pytest.LogCaptureFixture) -> None:
    jobs.record.enqueue("beat")
    job = claim_one()

    def taken_away() -> list[ClaimedJob]:
        assert release([job]) == {job.id}  # as if another worker had recovered it
        return [job]

    caplog.set_level(logging.WARNING, logger="django_jobretry")
    beat(scripted(lambda: [job], taken_away, lambda: [job]), 6)
    [warning] = lost_warnings(caplog)
    assert (warning.job_id, warning.attempt, warning.worker) == (job.id, 1, OWNER)  # type: ignore[attr-defined]
    assert warning.getMessage() == f"job {job.id} attempt 1 lost its lease while running on worker {OWNER}"


def test_the_next_attempt_of_a_lost_job_is_extended_again(caplog: pytest.LogCaptureFixture) -> None:
    """A loss is remembered per attempt: the same worker claiming the job again keeps its new lease."""
    jobs.record.enqueue("beat")
    first = claim_one()
    second: list[ClaimedJob] = []

    def taken_away() -> list[ClaimedJob]:
        Job.objects.filter(id=first.id).update(lease_expires_at=Now() - timedelta(seconds=1))
        assert [item.id for item in recovery.recover_expired(10, 10)] == [first.id]
        return [first]

    def claimed_again() -> list[ClaimedJob]:
        if not second:
            Job.objects.filter(id=first.id).update(run_at=Now())  # skip the recovery's backoff
            second.append(claim_one())
            Job.objects.filter(id=first.id).update(lease_expires_at=Now())  # about to run out
        return second

    caplog.set_level(logging.WARNING, logger="django_jobretry")
    beat(scripted(lambda: [first], taken_away, lambda: [first], claimed_again), 6)
    assert len(lost_warnings(caplog)) == 1
    assert second[0].attempt == 2
    extended = Job.objects.filter(id=first.id, lease_expires_at__gt=Now() + timedelta(seconds=LEASE / 2))
    assert list(extended.values_list("status", "attempts")) == [("running", 2)]


def test_the_worker_that_recovers_a_lost_job_names_the_worker_that_lost_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    jobs.record.enqueue("beat")
    job = claim_one()
    Job.objects.filter(id=job.id).update(lease_expires_at=Now() - timedelta(seconds=1))
    caplog.set_level(logging.WARNING, logger="django_jobretry")
    for item in recovery.recover_expired(10, 10):
        recovery.announce(item, object)
    [line] = [r for r in caplog.records if getattr(r, "outcome", None) == "lease_expired_retry"]
    assert f"lost its lease (worker {OWNER}); retry in" in line.getMessage()
    assert line.lost_by == OWNER  # type: ignore[attr-defined]


class CutAfter(Beats):
    """Beats that record each wait's timeout, and end the thread's database session at the second."""

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.timeouts: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout)
        if len(self.timeouts) == 2:  # in the heartbeat thread, after a beat: its connection is open
            backend = django_connection.connection.info.backend_pid
            params = django_connection.get_connection_params()
            params.pop("cursor_factory", None)
            params.pop("context", None)
            with psycopg.connect(**params, autocommit=True) as other:
                other.execute("SELECT pg_terminate_backend(%s)", [backend])
        return super().wait(timeout)


def test_a_failed_beat_is_tried_again_within_seconds_not_a_beat_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The leases run out while the heartbeat waits: after a failure it tries again at once (backoff)."""
    jobs.record.enqueue("beat")
    job = claim_one()
    beats = CutAfter(4)
    caplog.set_level(logging.INFO, logger="django_jobretry")
    thread = Heartbeat(
        worker_id=OWNER,
        running=lambda: [job],
        lease_seconds=LEASE,
        every=LEASE / 3,
        stop=beats,  # type: ignore[arg-type]
    )
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert beats.timeouts == [LEASE / 3, LEASE / 3, 0.5, LEASE / 3, LEASE / 3]  # the last one stops it
    assert [r.getMessage() for r in caplog.records if "heartbeat failed" in r.getMessage()]
    assert [r for r in caplog.records if f"answers the heartbeat of worker {OWNER} again" in r.getMessage()]
