"""Pruning walks indexes, never the table: every statement of a prune, run under EXPLAIN.

A large table of recent succeeded jobs and dead letters with a few old ones:
what the prune deletes must be found through the finished-at and dead-at
indexes (a scan in id order would read every recent row to find the few
old ones), and each batch is deleted by primary key. As in
test_claim_plan.py, the tables are truncated and the rows committed and
analysed first.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection

from django_jobretry.jobs import retention
from django_jobretry.jobs.sql import JOB
from django_jobretry.models import DeadLetter, Job

pytestmark = pytest.mark.django_db(transaction=True)

DEAD = DeadLetter._meta.db_table
#: Rows in each table; one in a hundred finished (or died) 30 days ago.
ROWS = 20_000
OLD = ROWS // 100


@pytest.fixture
def mostly_recent() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {JOB}, {DEAD}")
        cursor.execute(
            f"""
            INSERT INTO {JOB} (task_name, queue_name, policy_name, status, args, kwargs, priority, run_at,
                               attempts, max_attempts, lease_owner, errors, requeue_count, requeue_history,
                               enqueued_at, finished_at)
            SELECT 'bench.noop', 'default', 'default', 'succeeded', '[]', '{{}}', 0, now(), 1, 3, '', '[]',
                   0, '[]', now(), CASE WHEN g %% 100 = 0 THEN now() - interval '30 days' ELSE now() END
            FROM generate_series(1, %s) AS g
            """,
            [ROWS],
        )
        cursor.execute(
            f"""
            INSERT INTO {DEAD} (job_id, task_name, queue_name, policy_name, priority, args, kwargs, reason,
                                attempts, max_attempts, errors, last_error_class, last_error, requeue_count,
                                requeue_history, enqueued_at, dead_at)
            SELECT g, 'shop.task', 'default', 'default', 0, '[]', '{{}}', 'fatal', 1, 3, '[]', 'E', 'boom',
                   0, '[]', now(), CASE WHEN g %% 100 = 0 THEN now() - interval '30 days' ELSE now() END
            FROM generate_series(1, %s) AS g
            """,
            [ROWS],
        )
        cursor.execute(f"ANALYZE {JOB}")
        cursor.execute(f"ANALYZE {DEAD}")


def explaining(plans: list[tuple[str, str]]) -> Callable[..., Any]:
    """An execute wrapper that EXPLAINs each statement on the raw cursor before running it."""

    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        raw = context["cursor"].cursor
        raw.execute(f"EXPLAIN {sql}", params)
        plans.append((sql, "\n".join(row[0] for row in raw.fetchall())))
        return execute(sql, params, many, context)

    return wrapper


def prune_plans(prune: Callable[[], Any]) -> list[tuple[str, str]]:
    plans: list[tuple[str, str]] = []
    with connection.execute_wrapper(explaining(plans)):
        prune()
    return plans


def assert_on_indexes(plans: list[tuple[str, str]], table: str, index: str) -> None:
    # A workflow's jobs are a second pass, through its steps (jobs/retention.py): checked below.
    locks = [plan for sql, plan in plans if "FOR UPDATE SKIP LOCKED" in sql and "flowstep" not in sql]
    deletes = [plan for sql, plan in plans if "DELETE FROM" in sql]  # a dead letter's, in a CTE
    assert locks, plans
    assert deletes, plans
    for sql, plan in plans:
        assert f"Seq Scan on {table}" not in plan, (sql, plan)
    assert all(index in plan for plan in locks), locks
    assert all(f"{table}_pkey" in plan for plan in deletes), deletes


@pytest.mark.usefixtures("mostly_recent")
def test_pruning_succeeded_jobs_finds_them_through_the_finished_index() -> None:
    plans = prune_plans(lambda: retention.prune_succeeded(timedelta(days=7)))
    assert_on_indexes(plans, JOB, "jobretry_job_finished")
    assert Job.objects.count() == ROWS - OLD
    of_flows = [plan for sql, plan in plans if "FOR UPDATE SKIP LOCKED" in sql and "flowstep" in sql]
    assert len(of_flows) == 1, plans  # no flow here: one lock that finds nothing
    assert "jobretry_job_flow_step" in of_flows[0] or "jobretry_job_finished" in of_flows[0], of_flows


@pytest.mark.usefixtures("mostly_recent")
def test_pruning_dead_letters_finds_them_through_the_dead_at_index() -> None:
    plans = prune_plans(lambda: retention.prune_dead_letters(timedelta(days=7)))
    assert_on_indexes(plans, DEAD, "jobretry_dead_newest")
    assert DeadLetter.objects.count() == ROWS - OLD
