"""Whatever a row holds and whatever a handler's exception does, the worker stays up.

Each test puts one hostile job beside an innocent one, runs the real engine
in this process until nothing is live, and checks that the worker exited
normally, the innocent job ran exactly once, and the hostile one ended in a
recorded state: a clear attempt error, then a dead letter.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse

from django_jobretry import RetryableError, RetryPolicy, deadletters, job
from django_jobretry.jobs import history
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.inprocess import run_until_settled
from tests.integration.conftest import run_command
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("keep_signal_handlers")]

#: Two quick attempts, no jitter: enough to see a retry, then a dead letter.
TWICE = RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.01, jitter=0)

#: Released at the end of the slow-__str__ test, so its helper thread ends.
RELEASE = threading.Event()


class ExitOnStr(Exception):
    def __str__(self) -> str:
        raise SystemExit(3)


class SlowStr(Exception):
    def __str__(self) -> str:
        RELEASE.wait(30)
        return "finally rendered"


class NoInitRetryable(RetryableError):
    def __init__(self, reason: str) -> None:  # skips super().__init__: no .delay at all
        self.reason = reason


class BadDelayRetryable(RetryableError):
    def __init__(self, delay: Any) -> None:
        super().__init__("bad delay")
        self.delay = delay  # a value RetryableError itself would refuse


@job(name="tests.hostile.raise_exit_on_str", policy=TWICE)
def raise_exit_on_str() -> None:
    raise ExitOnStr


@job(name="tests.hostile.raise_slow_str", policy=TWICE)
def raise_slow_str() -> None:
    raise SlowStr


@job(name="tests.hostile.raise_no_init", policy=TWICE)
def raise_no_init() -> None:
    raise NoInitRetryable("upstream busy")


@job(name="tests.hostile.raise_bad_delay", policy=TWICE)
def raise_bad_delay(kind: str) -> None:
    delays: dict[str, Any] = {"text": "soon", "huge": timedelta(days=10**6), "negative": -5}
    raise BadDelayRetryable(delays[kind])


def set_raw(job_id: int, assignment: str) -> None:
    """Write a value enqueue() would never write, as a bad migration or hand-edit could."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE django_jobretry_job SET {assignment} WHERE id = %s", [job_id])


def innocent_ran_once() -> None:
    assert list(Execution.objects.values_list("key", "attempt")) == [("innocent", 1)]
    assert Job.objects.get(task_name=jobs.record.name).status == JobStatus.SUCCEEDED


def test_arguments_nested_deeper_than_python_can_decode() -> None:
    bad = jobs.record.enqueue("never")
    jobs.record.enqueue("innocent")
    depth = 5000  # far past Python's recursion limit, well within PostgreSQL's
    set_raw(bad.pk, f"args = '{'[' * depth}{']' * depth}'::jsonb")
    run_until_settled(concurrency=4)
    innocent_ran_once()
    dead = DeadLetter.objects.get(job_id=bad.pk)
    assert (dead.reason, dead.attempts) == ("exhausted", 3)
    assert dead.last_error_class == "django_jobretry.exceptions.UndecodableArguments"
    assert "cannot be decoded (RecursionError)" in dead.last_error
    # Loaded, the arguments come back as their text instead of failing the load.
    assert isinstance(dead.args, str)
    assert dead.args.startswith("[[[[")
    # An operator can still look at it, from the admin and the command line, and act on it.
    admin = Client()
    admin.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    page = admin.get(reverse("admin:django_jobretry_deadletter_change", args=[dead.pk]))
    assert page.status_code == 200
    assert "the stored arguments cannot be decoded" in page.content.decode()
    assert "not shown: the stored arguments cannot be decoded" in run_command(
        "deadletters", "show", str(dead.pk)
    )
    deadletters.discard(dead.pk, actor="ops")
    assert not DeadLetter.objects.exists()


def test_an_exception_whose_str_raises_system_exit() -> None:
    hostile = raise_exit_on_str.enqueue()
    jobs.record.enqueue("innocent")
    run_until_settled(concurrency=4)
    innocent_ran_once()
    dead = DeadLetter.objects.get(job_id=hostile.pk)
    assert (dead.reason, dead.attempts) == ("exhausted", 2)
    assert dead.last_error_class == f"{__name__}.ExitOnStr"
    assert dead.last_error == "ExitOnStr()"  # repr, since str() raised


def test_an_exception_whose_str_hangs_is_recorded_without_its_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history, "RENDER_SECONDS", 0.2)
    RELEASE.clear()
    try:
        hostile = raise_slow_str.enqueue()
        jobs.record.enqueue("innocent")
        run_until_settled(concurrency=4)
    finally:
        RELEASE.set()
    innocent_ran_once()
    dead = DeadLetter.objects.get(job_id=hostile.pk)
    assert (dead.reason, dead.attempts) == ("exhausted", 2)
    assert dead.last_error == "the error's text did not render within 0.2 s"
    assert [e["error_class"] for e in dead.errors] == [f"{__name__}.SlowStr"] * 2


def test_a_retryable_error_that_skipped_init_uses_the_policy_backoff() -> None:
    hostile = raise_no_init.enqueue()
    jobs.record.enqueue("innocent")
    run_until_settled(concurrency=4)
    innocent_ran_once()
    dead = DeadLetter.objects.get(job_id=hostile.pk)
    assert (dead.reason, dead.attempts) == ("exhausted", 2)
    assert dead.errors[0]["delay"] == pytest.approx(0.01)


@pytest.mark.parametrize("kind", ["text", "huge", "negative"])
def test_an_unusable_requested_delay_is_ignored(kind: str) -> None:
    hostile = raise_bad_delay.enqueue(kind)
    jobs.record.enqueue("innocent")
    run_until_settled(concurrency=4)
    innocent_ran_once()
    dead = DeadLetter.objects.get(job_id=hostile.pk)
    assert (dead.reason, dead.attempts) == ("exhausted", 2)
    assert dead.errors[0]["delay"] == pytest.approx(0.01)


@pytest.mark.parametrize("history", ['[{"job_id": "seven"}]', '[{"job_id": 1e30}]', '["text"]', "[7]"])
def test_a_requeue_history_edited_by_hand_does_not_stop_the_claim(history: str) -> None:
    edited = jobs.record.enqueue("edited")
    jobs.record.enqueue("innocent")
    set_raw(edited.pk, f"requeue_history = '{history}'::jsonb")
    run_until_settled(concurrency=4)
    assert sorted(Execution.objects.values_list("key", "attempt")) == [("edited", 1), ("innocent", 1)]
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == 2
