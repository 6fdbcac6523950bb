"""Two operators pausing and resuming one queue at the same time, on real connections in real threads.

Each thread has its own database connection; a barrier starts them
together. Whatever the interleaving, every call succeeds, at most one pause
row exists, no job is lost or changed but its held time, and the last word
wins.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connection

from django_jobretry.holds import pauses
from django_jobretry.models import Job, JobStatus, Pause
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 30
#: Seconds a thread may take before the test fails instead of hanging.
DEADLINE = 60.0


def in_threads(*actions: Callable[[], None]) -> list[BaseException]:
    barrier = threading.Barrier(len(actions))
    errors: list[BaseException] = []

    def run(action: Callable[[], None]) -> None:
        try:
            barrier.wait(timeout=DEADLINE)
            action()
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(action,)) for action in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
        assert not thread.is_alive(), "a pause or resume hung"
    return errors


def test_two_operators_pausing_and_resuming_at_once_lose_nothing() -> None:
    ids = {jobs.other_queue.enqueue(f"k{n}").id for n in range(20)}

    def alice() -> None:
        for _ in range(ROUNDS):
            pauses.pause(queue="other", actor="alice", reason="alice")
            pauses.resume(queue="other", actor="alice")

    def bob() -> None:
        for _ in range(ROUNDS):
            pauses.pause(queue="other", actor="bob", reason="bob")
            pauses.resume(queue="other", actor="bob")

    assert in_threads(alice, bob) == []
    assert Pause.objects.count() == 0
    after = Job.objects.filter(pk__in=ids)
    assert set(after.values_list("pk", flat=True)) == ids
    assert set(after.values_list("status", "attempts")) == {(JobStatus.READY, 0)}
    assert pauses.pause(queue="other", actor="carol") is True
    assert Pause.objects.get().paused_by == "carol"


def test_two_operators_pausing_at_once_make_one_pause() -> None:
    def pause_as(name: str) -> Callable[[], None]:
        def pause() -> None:
            pauses.pause(queue="other", actor=name, reason=name)

        return pause

    assert in_threads(pause_as("alice"), pause_as("bob")) == []
    row = Pause.objects.get()
    assert row.paused_by in {"alice", "bob"}
    assert row.reason == row.paused_by
