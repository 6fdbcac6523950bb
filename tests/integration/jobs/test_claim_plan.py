"""The hot queries use their partial indexes, proved by EXPLAIN on PostgreSQL.

A backlog of finished rows must not slow claiming or lease recovery down:
the partial indexes cover only ready (claim) and running (recovery) rows.

The table is truncated first and its rows committed and analysed before
EXPLAIN: tests that ran earlier in the same database leave dead index
entries behind (their transactions rolled back), and partial indexes
bloated by other tests' rows make the planner weigh them unlike in
production (CI's random test order once made it prefer another index).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection

from django_jobretry.holds import breakers, pauses
from django_jobretry.jobs.sql import EXPIRED_LEASES, JOB
from django_jobretry.jobs.statements import (
    bury_sql,
    claim_sql,
    schedule_retries_sql,
    succeed_and_claim_sql,
)
from django_jobretry.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def backlog() -> None:
    """20,000 succeeded jobs and 50 ready ones, then fresh statistics."""
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {JOB}")  # fresh, compact indexes: see the module docstring
        cursor.execute(
            f"""
            INSERT INTO {JOB} (task_name, queue_name, policy_name, status, args, kwargs, priority,
                               run_at, attempts, max_attempts, lease_owner, errors, requeue_count,
                               requeue_history, enqueued_at, finished_at)
            SELECT 'bench.noop', 'default', 'default',
                   CASE WHEN g <= 20000 THEN 'succeeded' ELSE 'ready' END,
                   '[]', '{{}}', 0, now() - interval '1 hour', 1, 3, '', '[]', 0, '[]', now(),
                   CASE WHEN g <= 20000 THEN now() ELSE NULL END
            FROM generate_series(1, 20050) AS g
            """
        )
        cursor.execute(f"ANALYZE {JOB}")


def plan(sql: str, params: dict[str, Any] | tuple[Any, ...]) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.usefixtures("backlog")
@pytest.mark.parametrize("filter_queues", [False, True])
def test_claim_uses_the_partial_claim_index(filter_queues: bool) -> None:
    params = {"queues": ["default"], "limit": 10, "owner": "explain", "lease": 30}
    text = plan(claim_sql(filter_queues=filter_queues), params)
    assert "jobretry_job_claim" in text, text
    assert f"Seq Scan on {JOB}" not in text, text


@pytest.mark.usefixtures("backlog")
def test_lease_recovery_uses_the_partial_lease_index() -> None:
    text = plan(EXPIRED_LEASES, {"limit": 100})
    assert "jobretry_job_lease" in text, text


@pytest.mark.usefixtures("backlog")
@pytest.mark.parametrize("filter_queues", [False, True])
def test_succeed_and_claim_uses_the_claim_index_and_the_key(filter_queues: bool) -> None:
    params = {
        "queues": ["default"],
        "limit": 1,
        "owner": "explain",
        "lease": 30,
        **{
            "ids": [1],
            "attempts": [1],
            "tokens": ["00000000-0000-0000-0000-000000000000"],
            "results": [None],
        },
    }
    text = plan(succeed_and_claim_sql(filter_queues=filter_queues), params)
    assert "jobretry_job_claim" in text, text
    assert "django_jobretry_job_pkey" in text, text  # the success finds its rows by id
    assert f"Seq Scan on {JOB}" not in text, text


@pytest.mark.usefixtures("backlog")
def test_the_live_job_of_a_unique_key_is_found_through_its_index() -> None:
    """The index leaves unkeyed jobs out (they never conflict); a lookup by key still uses it."""
    queryset = Job.objects.live().filter(unique_key="order-7")
    sql, params = queryset.query.sql_with_params()
    text = plan(sql, params)
    assert "jobretry_job_unique_live_key" in text, text


FENCE_PARAMS = {"ids": [1, 2], "attempts": [1, 1], "tokens": ["00000000-0000-0000-0000-000000000000"] * 2}


@pytest.mark.usefixtures("backlog")
@pytest.mark.parametrize(
    ("sql", "params"),
    [
        (
            schedule_retries_sql(),
            {**FENCE_PARAMS, "entries": ["{}", "{}"], "delays": [1.0, 1.0], "limit": 10},
        ),
        (
            bury_sql(),
            {"id": 1, "attempt": 1, "token": FENCE_PARAMS["tokens"][0], "entry": "{}", "reason": "fatal"}
            | {"history": 10, "error_class": "x", "message": "x"},
        ),
    ],
    ids=["schedule_retries", "bury"],
)
def test_failure_writes_find_their_rows_by_key_or_among_running_ones(
    sql: str, params: dict[str, Any]
) -> None:
    """By id, or through the partial index of running rows (the fence needs a running row)."""
    text = plan(sql, params)
    assert "django_jobretry_job_pkey" in text or "jobretry_job_lease" in text, text
    assert f"Seq Scan on {JOB}" not in text, text


@pytest.mark.usefixtures("backlog")
@pytest.mark.parametrize("filter_queues", [False, True])
def test_the_claim_keeps_its_index_with_pauses_and_open_breakers(filter_queues: bool) -> None:
    for n in range(5):
        pauses.pause(queue=f"paused-{n}", actor="explain", undeployed=True)
        pauses.pause(task=f"paused.task_{n}", actor="explain", undeployed=True)
        breakers.hold_task(f"open.task_{n}", timedelta(hours=1), None, job_id=0)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    params = {"queues": ["default"], "limit": 10, "owner": "explain", "lease": 30}
    text = plan(claim_sql(filter_queues=filter_queues), params)
    assert "jobretry_job_claim" in text, text
    assert f"Seq Scan on {JOB}" not in text, text
    assert "jobretry_held" in text, text  # the hold filter is there, on the index scan's rows
