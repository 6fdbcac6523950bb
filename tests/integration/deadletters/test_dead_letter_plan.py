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
from django_jobretry.deadletters import search
from django_jobretry.models import DeadLetter

pytestmark = pytest.mark.django_db(transaction=True)

TABLE = DeadLetter._meta.db_table


COLUMNS = (
    "job_id, task_name, queue_name, policy_name, priority, args, kwargs, reason, attempts, max_attempts, "
    "errors, last_error_class, last_error, requeue_count, requeue_history, enqueued_at, dead_at"
)


def refill(select: str, *, vacuum: bool = False) -> None:
    """An emptied table holding the rows of ``select`` (over ``g``, 1 to 50,000: COLUMNS), analysed."""
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {TABLE}")
        cursor.execute(f"INSERT INTO {TABLE} ({COLUMNS}) {select} FROM generate_series(1, 50000) AS g")
        cursor.execute(f"{'VACUUM ' if vacuum else ''}ANALYZE {TABLE}")


@pytest.fixture
def many_dead() -> None:
    refill(
        """
        SELECT g, CASE WHEN g % 1000 = 1 THEN 'shop.rare' ELSE 'shop.task' || (g % 20) END,
               CASE WHEN g % 1000 = 0 THEN 'rare' ELSE 'default' END,
               'default', 0, '[]', '{}', CASE WHEN g % 2 = 0 THEN 'fatal' ELSE 'exhausted' END,
               1, 3, '[]', 'builtins.ValueError', 'boom', 0, '[]', now(), now() - g * interval '1 second'
        """
    )


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


@pytest.fixture
def many_groups() -> None:
    """50,000 dead letters in 20 failure groups, committed, vacuumed (so the visibility map is set).

    Each carries a traceback of about 1 KB, as real dead letters do: rows as
    narrow as the listing test's would make reading the table look cheap.
    """
    refill(
        """
        SELECT g, 'shop.task' || (g % 4), 'default', 'default', 0, '[]', '{}',
               CASE WHEN g % 2 = 0 THEN 'fatal' ELSE 'exhausted' END, 1, 3,
               jsonb_build_array(jsonb_build_object('attempt', 1, 'ended', 'error', 'traceback',
                                                    repeat('  File "/srv/app/shop.py", line 9', 30))),
               'shop.Error' || (g % 10), 'order ' || g || ' failed', 0, '[]', now(),
               now() - g * interval '1 second'
        """,
        vacuum=True,
    )


@pytest.mark.usefixtures("many_groups")
def test_failure_groups_are_counted_from_the_fingerprint_index_alone() -> None:
    """No table read and no sort of the rows: an index-only scan, already in group order.

    bench/failure_groups.py times the same statement on 10^6 dead letters.
    """
    sql, params = search.query(since=None, limit=50)
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        text = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Only Scan using jobretry_dead_fingerprint" in text, text
    assert "Seq Scan" not in text, text
    assert len(search.groups(limit=50)) == 20  # task g % 4 and class g % 10: 20 pairs
