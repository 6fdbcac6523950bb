"""A resume and a closed breaker wake the workers of the released queues; a pause wakes nobody.

A real LISTEN session on its own connection watches what workers would
receive, with a hard deadline; the jobs are committed (transactional test).
"""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from django.db import connection

from django_jobretry.holds import breakers, pauses
from django_jobretry.jobs.insert import CHANNEL
from django_jobretry.models import Circuit
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db(transaction=True)

#: Seconds a notification may take to arrive before the test fails instead of hanging.
DEADLINE = 10.0


def mark(text: str) -> None:
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        other.execute("SELECT pg_notify(%s, %s)", [CHANNEL, text])


def received_until_mark(session: psycopg.Connection) -> list[str]:
    """Every payload before the marker this test sends last (PostgreSQL delivers in commit order)."""
    mark("marker")
    payloads: list[str] = []
    for notify in session.notifies(timeout=DEADLINE):
        if notify.payload == "marker":
            return payloads
        payloads.append(notify.payload)
    raise AssertionError(f"no marker within {DEADLINE}s; got {payloads}")


def test_a_resume_wakes_the_released_queue_and_a_pause_does_not(listener: psycopg.Connection) -> None:
    jobs.other_queue.enqueue("k")
    received_until_mark(listener)  # the enqueue's own wake-up
    pauses.pause(task=jobs.other_queue.name, actor="alice")
    assert received_until_mark(listener) == []
    pauses.resume(task=jobs.other_queue.name, actor="alice")
    assert received_until_mark(listener) == ["other"]


def test_a_probe_and_a_close_wake_the_task_queue(listener: psycopg.Connection) -> None:
    jobs.other_queue.enqueue("k")
    breakers.hold_task(jobs.other_queue.name, timedelta(hours=1), None, job_id=0)
    received_until_mark(listener)
    Circuit.objects.update(open_until=Circuit.objects.get().opened_at)
    breakers.beat()  # half-open: the job is the probe
    assert received_until_mark(listener) == ["other"]
    assert breakers.close(jobs.other_queue.name, actor="alice") is True
    assert received_until_mark(listener) == ["other"]
