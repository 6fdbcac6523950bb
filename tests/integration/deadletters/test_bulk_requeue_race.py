"""Set-based bulk requeue under a race: every dead letter becomes exactly one job (issue 22).

Two operators press "Yes" on "Requeue all matching" for 50,000 dead letters
at the same moment, through the admin, on two real connections: together
they make one job per dead letter, each is told how many the other already
handled, and the unique-key refusals are named row by row. Then the
compare-and-swap itself, choreographed so the second requeue's statement
provably starts while the first still holds its rows: with the row lock no
duplicate, and, as the negative control, without it the same choreography
makes two jobs of one dead letter.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections
from django.urls import reverse

from django_jobretry import deadletters as service
from django_jobretry.console import counters
from django_jobretry.deadletters import chunks
from django_jobretry.models import DeadLetter, Job
from tests.factories import JobFactory
from tests.integration.conftest import Operator, hidden_inputs, messages_of

pytestmark = pytest.mark.django_db(transaction=True)

TABLE = DeadLetter._meta.db_table
TASK = "tests.jobs_app.jobs.record"
#: Dead letters 5,000, 10,000, ... 50,000 carry one of three unique keys; a live job holds "key-0".
KEYED_EVERY = 5_000
DONE = re.compile(r"^(\d+) dead letters? requeued\.")
HANDLED = re.compile(r"(\d+) (?:was|were) already handled by someone else\.")
REFUSED = re.compile(r"dead letter (\d+): a live job holds unique key '(key-\d)'")
#: A hang detector, not a speed bound: 50,000 requeues took 44 s under a loaded suite, and over 120 s in CI.
DEADLINE = 300


def bury_many(count: int) -> list[int]:
    """``count`` dead letters of one real task, in one statement; their ids in order."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {TABLE} (job_id, task_name, queue_name, policy_name, priority, args, kwargs, reason,
                                 attempts, max_attempts, errors, last_error_class, last_error, requeue_count,
                                 requeue_history, enqueued_at, dead_at, unique_key)
            SELECT g, %s, 'default', 'three', 0, jsonb_build_array('k' || g), '{{}}', 'exhausted',
                   3, 3, '[]', 'builtins.ValueError', 'boom', 0, '[]', now(), now(),
                   CASE WHEN g %% %s = 0 THEN 'key-' || (g / %s %% 3) END
            FROM generate_series(1, %s) AS g ORDER BY g
            RETURNING id
            """,
            [TASK, KEYED_EVERY, KEYED_EVERY, count],
        )
        return sorted(row[0] for row in cursor.fetchall())


def expected_refusals(ids: list[int]) -> dict[int, str]:
    """The keyed dead letters the guard must refuse: key-0 is held, and the lowest id takes the others."""
    keyed = DeadLetter.objects.filter(pk__in=ids, unique_key__isnull=False).order_by("pk")
    taken, refused = {"key-0"}, {}
    for dead in keyed:
        assert dead.unique_key is not None
        if dead.unique_key in taken:
            refused[dead.pk] = dead.unique_key
        taken.add(dead.unique_key)
    return refused


def at_once(*actions: Callable[[], Any]) -> list[Any]:
    """Run ``actions`` on their own threads and connections, released together; hard deadline."""
    barrier = threading.Barrier(len(actions), timeout=DEADLINE)
    results: list[Any] = [None] * len(actions)

    def run(index: int, action: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[index] = action()
        except Exception as exc:  # reported through results, asserted by the caller
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=item, daemon=True) for item in enumerate(actions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=DEADLINE)
    assert not any(thread.is_alive() for thread in threads), "a racing requeue hung"
    return results


def revived_dead_letter_ids() -> list[int]:
    """Per job, the dead letter its last requeue entry names: one entry per job made by a requeue."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (requeue_history -> -1 ->> 'dead_letter_id')::bigint FROM {Job._meta.db_table} "
            "WHERE requeue_count > 0"
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.timeout(2 * DEADLINE)
def test_two_operators_requeue_all_matching_50000_once_between_them(
    superuser: Operator, django_user_model: Any
) -> None:
    ids = bury_many(50_000)
    JobFactory.create(unique_key="key-0")  # a live job: every dead letter keyed key-0 is refused
    refused = expected_refusals(ids)
    assert len(refused) == 8  # 3 of key-0, 3 of key-1, 2 of key-2
    colleague = Operator(django_user_model.objects.create_superuser("colleague", "c@example.com", "pw"))
    url = reverse("admin:django_jobretry_deadletter_requeue_matching")
    forms = [operator.get(url) for operator in (superuser, colleague)]
    for operator in (superuser, colleague):
        operator.get(reverse("admin:django_jobretry_deadletter_changelist"))  # the CSRF cookie
    assert [page.context["counts"].total for page in forms] == [50_000, 50_000]

    operators = (superuser, colleague)
    redirects = at_once(
        *(
            lambda o=operator, f=form: o.post(url, hidden_inputs(f.text))
            for operator, form in zip(operators, forms, strict=True)
        )
    )

    # Each operator's message is read from the list page its redirect leads to, one operator at
    # a time: the test client takes response.context from the process-wide template_rendered
    # signal, so two pages rendered at once on two threads could each show the other's message.
    assert [redirect.status_code for redirect in redirects] == [302, 302], redirects
    pages = [
        operator.get(redirect["Location"]) for operator, redirect in zip(operators, redirects, strict=True)
    ]
    said = [" ".join(messages_of(page)) for page in pages]
    left = sorted(DeadLetter.objects.values_list("pk", flat=True))
    assert left == sorted(refused), (len(left), left[:5], left[-5:], said)
    revived = revived_dead_letter_ids()
    assert len(revived) == len(set(revived)) == 50_000 - len(refused), said
    assert set(revived) == set(ids) - set(refused)
    done = [int(DONE.match(text).group(1)) for text in said]
    assert sum(done) == 50_000 - len(refused), said
    for text, requeued in zip(said, done, strict=True):
        handled = HANDLED.search(text)
        assert (int(handled.group(1)) if handled else 0) == 50_000 - len(refused) - requeued, text
        assert {int(pk): key for pk, key in REFUSED.findall(text)} == refused, text


def waiting_on_a_lock(deadline: float) -> None:
    """Return once another backend waits on a row lock (the second requeue, inside its statement).

    This runs inside the first requeue's transaction, where PostgreSQL keeps
    one snapshot of pg_stat_activity: each poll clears it to see the present.
    """
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.01)
    raise AssertionError("the second requeue never waited on the first one's rows")


@pytest.fixture
def first_holds_its_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first chunk to count its requeues waits, rows still held, until the other requeue is blocked."""
    real_count, first = counters.count, threading.Lock()

    def count(*args: Any, **kwargs: Any) -> None:
        if first.acquire(blocking=False):
            waiting_on_a_lock(time.monotonic() + 30)
        real_count(*args, **kwargs)

    monkeypatch.setattr(counters, "count", count)


def race_two_requeues(ids: list[int]) -> list[Any]:
    return at_once(lambda: service.requeue_many(ids, actor="a"), lambda: service.requeue_many(ids, actor="b"))


@pytest.mark.usefixtures("first_holds_its_rows")
def test_the_second_requeue_waits_and_reports_every_row_handled() -> None:
    ids = bury_many(300)
    results = race_two_requeues(ids)
    assert sorted(len(result.done) for result in results) == [0, 300 - len(expected_refusals(ids))], results
    assert sorted(len(result.already_handled) for result in results) == [0, 300]
    revived = revived_dead_letter_ids()
    assert len(revived) == len(set(revived)) == 300


@pytest.mark.usefixtures("first_holds_its_rows")
def test_negative_control_without_the_row_lock_one_dead_letter_becomes_two_jobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chunks, "_LOCK", chunks._LOCK.replace("FOR UPDATE", ""))
    ids = bury_many(300)
    race_two_requeues(ids)
    revived = revived_dead_letter_ids()
    assert len(revived) > len(set(revived)), "without FOR UPDATE both requeues should have revived the rows"


def test_a_chunk_with_a_dead_periodic_run_keeps_the_guard_and_reports_its_slot_taken() -> None:
    """Only chunks without keys or slots skip ON CONFLICT: a slot another run holds is refused, no error.

    Were the chunk's ``keyed`` test to ignore schedules, the INSERT would
    fail on jobretry_job_one_run_per_slot (checked by hand when it was written).
    """
    taken = JobFactory.create(schedule_name="nightly")
    Job.objects.filter(pk=taken.pk).update(schedule_slot="2026-12-01T02:00:00+00:00")
    periodic = DeadLetter.objects.create(
        **{**plain_dead_letter(), "schedule_name": "nightly", "schedule_slot": "2026-12-01T02:00:00+00:00"}
    )
    free = DeadLetter.objects.create(**plain_dead_letter())
    result = service.requeue_many([periodic.pk, free.pk], actor="a")
    assert (result.done, result.conflicts) == ([free.pk], [periodic.pk])
    assert DeadLetter.objects.filter(pk=periodic.pk).exists()


def plain_dead_letter() -> dict[str, Any]:
    return {
        "job_id": 7, "task_name": TASK, "queue_name": "default", "policy_name": "three",
        "reason": "exhausted", "attempts": 3, "max_attempts": 3, "enqueued_at": "2026-12-01T01:00:00+00:00",
    }  # fmt: skip
