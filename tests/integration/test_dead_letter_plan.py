"""Dead-letter listing stays on its indexes, filtered or not, at any table size.

The benchmark (bench/deadletters.py, docs/performance.md) measures 1,000,000
rows; this test proves the plan shape on a smaller table after ANALYZE. The
table is truncated and the rows committed first, so that indexes bloated by
other tests' rolled-back rows do not sway the planner (see test_claim_plan.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from django_jobretry import deadletters as service
from django_jobretry.models import DeadLetter

pytestmark = pytest.mark.django_db(transaction=True)

TABLE = DeadLetter._meta.db_table


@pytest.fixture
def many_dead() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {TABLE}")
        cursor.execute(
            f"""
            INSERT INTO {TABLE} (job_id, task_name, queue_name, policy_name, priority, args, kwargs, reason,
                                 attempts, max_attempts, errors, last_error_class, last_error, requeue_count,
                                 requeue_history, enqueued_at, dead_at)
            SELECT g, CASE WHEN g % 1000 = 1 THEN 'shop.rare' ELSE 'shop.task' || (g % 20) END,
                   CASE WHEN g % 1000 = 0 THEN 'rare' ELSE 'default' END,
                   'default', 0, '[]', '{{}}', CASE WHEN g % 2 = 0 THEN 'fatal' ELSE 'exhausted' END,
                   1, 3, '[]', 'builtins.ValueError', 'boom', 0, '[]', now(), now() - g * interval '1 second'
            FROM generate_series(1, 50000) AS g
            """
        )
        cursor.execute(f"ANALYZE {TABLE}")


def plan(queryset: Any) -> str:
    return str(queryset.explain())


@pytest.mark.usefixtures("many_dead")
@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({}, "jobretry_dead_newest"),
        ({"queue_name": "rare"}, "jobretry_dead_queue"),
        ({"task_name": "shop.rare"}, "jobretry_dead_task"),
    ],
)
def test_first_page_reads_an_index_not_the_table(filters: dict[str, Any], index: str) -> None:
    """Rare values (0.1 %) are the case a shared index would serve by walking most of it.

    The planner may sort the few rows a rare value matches; what must never
    happen is reading the whole table.
    """
    text = plan(service.filtered(**filters)[:50])
    assert index in text, text
    assert "Seq Scan" not in text, text
    if not filters:
        assert "Sort" not in text.replace("Sort Key", ""), text
