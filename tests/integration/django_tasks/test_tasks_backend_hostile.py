"""django.tasks results of hand-edited histories: what a CHECK cannot see is read as far as it goes.

The tables refuse times Python cannot hold and histories that are not
arrays (test_readable_rows.py), so a result reads its row as it is. Inside
a history anything may still stand: entries that are not objects, a time
that is no date, an array nested past Python's recursion limit (loaded as
its text). Django 6+ only (tests/conftest.py).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.tasks import TaskResultStatus

from django_jobretry.models import DeadLetter
from tests.integration.django_tasks.tasks_backend import fail
from tests.jobs_app import tasks

pytestmark = pytest.mark.django_db


def dead_of_three_attempts() -> tuple[str, DeadLetter]:
    enqueued = tasks.always_fails.enqueue("k")
    for owner in ("w1", "w2", "w3"):
        fail(owner, ConnectionResetError(f"reset by {owner}"))
    return enqueued.id, DeadLetter.objects.get()


def set_errors(dead: DeadLetter, sql: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {DeadLetter._meta.db_table} SET errors = {sql} WHERE id = %s", [dead.pk])


def test_entries_that_are_not_objects_or_hold_no_date_are_skipped_or_unread() -> None:
    result_id, dead = dead_of_three_attempts()
    set_errors(dead, """errors || '["a string", 3, {"at": "2026-02-30T00:00:00"}]'::jsonb""")
    result = tasks.always_fails.get_result(result_id)
    assert (result.status, result.worker_ids) == (TaskResultStatus.FAILED, ["w1", "w2", "w3"])
    assert len(result.errors) == 4  # the three attempts and the one object among the additions
    assert result.last_attempted_at == dead.dead_at  # the last entry's "at" is no date


def test_a_history_nested_past_the_recursion_limit_reads_as_no_entries() -> None:
    result_id, dead = dead_of_three_attempts()
    set_errors(dead, "(repeat('[', 5000) || repeat(']', 5000))::jsonb")  # an array: the CHECK lets it be
    result = tasks.always_fails.get_result(result_id)
    assert (result.status, result.errors, result.worker_ids) == (TaskResultStatus.FAILED, [], ["", "", ""])
