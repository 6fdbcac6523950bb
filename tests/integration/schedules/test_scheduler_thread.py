"""The scheduler duty, with a thread of its own: it declares once, sleeps until a slot, rides out failures."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest
from django.db import DatabaseError
from django.db.models.functions import Now

from django_jobretry.models import Schedule
from django_jobretry.policy.slots import Cadence
from django_jobretry.schedules import ScheduleSpec, runs
from django_jobretry.schedules.runs import MAX_SLEEP, Scheduler

pytestmark = pytest.mark.django_db(transaction=True)

HOURLY = {
    "hourly": ScheduleSpec("hourly", "tests.jobs_app.jobs.record_run", Cadence(every=timedelta(hours=1)))
}


def test_the_first_look_declares_and_sleeps_until_the_next_slot_at_most_thirty_seconds() -> None:
    scheduler = Scheduler("w", lambda: HOURLY, threading.Event())
    assert 0 < scheduler.look() <= MAX_SLEEP
    assert Schedule.objects.filter(name="hourly").exists()
    Schedule.objects.filter(name="hourly").update(next_slot=Now() + timedelta(seconds=5))
    assert 0 < scheduler.look() <= 5
    Schedule.objects.filter(name="hourly").update(next_slot=Now() + timedelta(minutes=10))
    assert scheduler.look() == MAX_SLEEP


def test_nothing_declared_sleeps_the_longest() -> None:
    assert Scheduler("w", dict, threading.Event()).look() == MAX_SLEEP


def test_a_failing_look_is_logged_once_and_the_thread_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls = threading.Semaphore(0)

    def failing(specs: object, apart: object) -> None:
        calls.release()
        raise DatabaseError("the database is restarting")

    stop = threading.Event()
    monkeypatch.setattr(runs, "declare_rows", failing)
    monkeypatch.setattr(runs, "RETRY_AFTER", 0.01)
    scheduler = Scheduler("w", lambda: HOURLY, stop)
    with caplog.at_level(logging.DEBUG, logger="django_jobretry"):
        scheduler.start()  # the duty starts its own thread
        for _ in range(3):
            assert calls.acquire(timeout=10), "the thread stopped looking after a failure"
        stop.set()
        scheduler.thread.join(timeout=10)
    assert not scheduler.thread.is_alive()
    failures = [r for r in caplog.records if r.getMessage().startswith("could not look at the schedules")]
    assert [r.levelno for r in failures[:3]] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
