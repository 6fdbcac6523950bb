"""A job held by a pause or a breaker keeps its ``retry_for`` time: the hold is not spent on its deadline.

Each case runs twice, held and not held, from the same rows: an hour since
the first attempt against a 30-minute ``retry_for``. Not held, the next
failure is past the deadline (a dead letter); held for 50 of those minutes,
it is 10 minutes in (a retry). Time passing is made by moving rows back on
the database clock, never by waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from django.db import transaction

from django_jobretry import RetryPolicy, job
from django_jobretry.holds import breakers, pauses
from django_jobretry.models import Circuit, DeadLetter, DeadReason, Job, JobStatus, Pause
from django_jobretry.testing import run_jobs
from tests.processes import db_now

pytestmark = pytest.mark.django_db

DEADLINED = RetryPolicy(max_attempts=100, base_delay=0.001, max_delay=0.001, jitter=0, retry_for=1800)


@job(policy=DEADLINED)
def keeps_failing() -> None:
    raise ConnectionError("partner down")


def pause_for(since: datetime) -> None:
    pauses.pause(task=keeps_failing.name, actor="ops")
    Pause.objects.update(paused_at=since)
    pauses.resume(task=keeps_failing.name, actor="ops")


def breaker_for(since: datetime) -> None:
    with transaction.atomic():
        breakers.hold_task(keeps_failing.name, timedelta(minutes=5), None, job_id=0)
    Circuit.objects.update(opened_at=since)
    assert breakers.close(keeps_failing.name, actor="ops")


@pytest.mark.parametrize("hold", [pause_for, breaker_for], ids=["pause", "breaker"])
@pytest.mark.parametrize("held", [True, False], ids=["held", "not_held"])
def test_time_held_is_not_spent_on_retry_for(hold: Callable[[datetime], None], held: bool) -> None:
    failing = keeps_failing.enqueue()
    run_jobs()  # the first attempt fails: first_attempt_at is set, the retry is due at once
    now = db_now()
    held_since = now - timedelta(minutes=50)
    Job.objects.filter(pk=failing.id).update(first_attempt_at=now - timedelta(hours=1), run_at=held_since)
    if held:
        hold(held_since)
        row = Job.objects.get(pk=failing.id)
        assert 50 * 60 <= row.held_seconds < 51 * 60
        Job.objects.filter(pk=failing.id).update(run_at=db_now())  # a breaker's release may space it out
    run_jobs()
    if held:
        row = Job.objects.get(pk=failing.id)
        assert (row.status, row.attempts) == (JobStatus.READY, 2)
        assert not DeadLetter.objects.exists()
    else:
        assert DeadLetter.objects.get(job_id=failing.id).reason == DeadReason.DEADLINE
