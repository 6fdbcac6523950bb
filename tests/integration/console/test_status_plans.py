"""The dashboard and `manage.py jobstatus` stay index walks that stop early, at any table size.

Their figures are read in an incident, when the jobs table may hold a
million rows. Each statement of console/__init__.py runs here under
``EXPLAIN ANALYZE`` on a skewed table - a backlog in one queue, a few jobs
in another that most of the finished history belongs to, a rare dead-letter
queue - after ANALYZE, with the count limit lowered to 100: no table is read
sequentially or as a bitmap (which reads every match before the LIMIT), and
no scan returns more rows than the limit allows. A negative control shows
the check catching the GROUP BY the dashboard used to run.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from django_jobretry import console
from django_jobretry.console import trends
from django_jobretry.jobs.sql import DEAD, DEATHS, JOB
from django_jobretry.models import DeadReason
from tests.integration.console.test_status_samples import next_minute_sampled

pytestmark = pytest.mark.django_db

#: The count limit of these plans: far below the rows each count could read.
CAP = 100
#: Most rows a scan may return per loop: a ready count reads up to CAP + 1 past the retrying ones.
MOST = 2 * (CAP + 1)
_NODE = re.compile(r"on (django_jobretry_\w+)\b.*\(actual rows=(\d+) loops=\d+\)")

_JOB_COLUMNS = (
    "task_name, queue_name, policy_name, status, args, kwargs, priority, run_at, attempts, max_attempts, "
    "lease_owner, lease_token, lease_expires_at, errors, requeue_count, requeue_history, enqueued_at, "
    "started_at, finished_at"
)


_JOB_ROWS = (
    # Succeeded, half in mail: the column's statistics say mail is common.
    """SELECT 't', CASE WHEN g % 2 = 0 THEN 'mail' ELSE 'default' END, 'default', 'succeeded', '[]', '{}', 0,
              now() - interval '1 day', 1, 3, 'w', NULL, NULL, '[]', 0, '[]', now(), now(),
              now() - g * interval '1 second'
       FROM generate_series(1, 20000) AS g""",
    # The backlog, in default; one in a hundred retrying, one in ten at priority 10.
    """SELECT 't', 'default', 'default', 'ready', '[]', '{}', CASE WHEN g % 10 = 0 THEN 10 ELSE 0 END,
              now() - g * interval '1 second', CASE WHEN g % 100 = 0 THEN 1 ELSE 0 END, 3, '', NULL, NULL,
              '[]', 0, '[]', now(), NULL, NULL
       FROM generate_series(1, 3000) AS g""",
    # Three ready in mail, the oldest due 3 minutes ago, the newest retrying.
    """SELECT 't', 'mail', 'default', 'ready', '[]', '{}', 0, now() - g * interval '1 minute',
              CASE WHEN g = 1 THEN 1 ELSE 0 END, 3, '', NULL, NULL, '[]', 0, '[]', now(), NULL, NULL
       FROM generate_series(1, 3) AS g""",
    """SELECT 't', 'default', 'default', 'running', '[]', '{}', 0, now(), 1, 3, 'w', gen_random_uuid(),
              now() + interval '1 minute', '[]', 0, '[]', now(), now() - g * interval '1 second', NULL
       FROM generate_series(1, 20) AS g""",
)


@pytest.fixture
def skewed() -> None:
    """20,000 succeeded jobs (half in mail), 3,000 ready in default (1 in 100 retrying), 3 in mail.

    Plus 20 running jobs, and 6,000 dead letters of which 6 in queue "rare".
    """
    with connection.cursor() as cursor:
        for rows in _JOB_ROWS:
            cursor.execute(f"INSERT INTO {JOB} ({_JOB_COLUMNS}) {rows}")
        cursor.execute(
            f"""
            INSERT INTO {DEAD} (job_id, task_name, queue_name, policy_name, priority, args, kwargs, reason,
                                attempts, max_attempts, errors, last_error_class, last_error, requeue_count,
                                requeue_history, enqueued_at, dead_at)
            SELECT g, 't', CASE WHEN g % 1000 = 0 THEN 'rare' ELSE 'default' END, 'default', 0, '[]', '{{}}',
                   CASE WHEN g % 1000 = 1 THEN 'fatal' ELSE 'exhausted' END, 1, 3, '[]', 'E', 'boom', 0, '[]',
                   now(), now() - g * interval '1 minute'
            FROM generate_series(1, 6000) AS g
            """
        )
        cursor.execute(f"ANALYZE {JOB}")
        cursor.execute(f"ANALYZE {DEAD}")


def explain(sql: str, params: dict[str, Any]) -> str:
    with console.index_walks() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def assert_bounded_index_walks(plan: str) -> None:
    """No table read whole, or as a bitmap; no scan returning more rows than the limit allows."""
    assert "Seq Scan on django_jobretry" not in plan, plan
    assert "Bitmap" not in plan, plan
    for table, rows in _NODE.findall(plan):
        assert int(rows) <= MOST, f"a scan of {table} returned {rows} rows:\n{plan}"


@pytest.mark.usefixtures("skewed")
def test_the_queue_rows_walk_their_indexes_and_stop() -> None:
    plan = explain(console.QUEUES_SQL, {"cap": CAP + 1})
    assert_bounded_index_walks(plan)
    for index in (
        "jobretry_job_claim_queue",
        "jobretry_job_retrying",
        "jobretry_dead_queue",
        "jobretry_job_lease",
    ):
        assert index in plan, plan
    # The queue with 3 ready jobs is counted by its own index range, not by walking the backlog.
    assert "Filter: ((queue_name)" not in plan, plan


@pytest.mark.usefixtures("skewed")
def test_the_totals_walk_their_indexes_and_stop() -> None:
    totals = explain(console.TOTALS_SQL, {"cap": CAP + 1, "reasons": list(DeadReason.values)})
    assert_bounded_index_walks(totals)
    assert "jobretry_dead_reason" in totals
    assert "jobretry_job_finished" in totals


@pytest.fixture
def dying() -> None:
    """6,000 deaths: 3,000 of task "storm" in the last hour, the rest over the week; a rare task and class."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {DEATHS} (died_at, task_name, queue_name, reason, error_class)
            SELECT now() - g * CASE WHEN g <= 3000 THEN interval '1 second' ELSE interval '100 s' END,
                   CASE WHEN g <= 3000 THEN 'storm' WHEN g % 1000 = 0 THEN 'rare' ELSE 'calm' END, 'default',
                   'exhausted', CASE WHEN g % 1000 = 7 THEN 'RareError' ELSE 'PartnerTimeout' END
            FROM generate_series(1, 6000) AS g
            """
        )
        cursor.execute(f"ANALYZE {DEATHS}")


@pytest.mark.usefixtures("skewed", "dying")
def test_the_deaths_walk_their_indexes_and_stop() -> None:
    now = timezone.now()
    starts = [now - timedelta(hours=h) for h in range(24, 0, -1)]
    plans = {
        "buckets": explain(
            trends.DEATH_BUCKETS_SQL, {"bar": CAP + 1, "starts": starts, "stops": [*starts[1:], now]}
        ),
        "by task": explain(trends.BY_TASK_SQL, {"cap": CAP + 1, "limit": CAP}),
        "by error": explain(trends.BY_ERROR_SQL, {"cap": CAP + 1}),
    }
    for name, plan in plans.items():
        assert_bounded_index_walks(plan)
        assert "Seq Scan on jobretry_death" not in plan, (name, plan)
        for rows in re.findall(r"on jobretry_death\b.*\(actual rows=(\d+) loops=\d+\)", plan):
            assert int(rows) <= MOST, (name, plan)
    assert "jobretry_death_at" in plans["buckets"]
    assert "jobretry_death_task" in plans["by task"]
    assert "jobretry_job_retrying" in plans["by task"]
    assert "jobretry_death_error" in plans["by error"]


@pytest.mark.usefixtures("skewed", "dying")
def test_the_deaths_are_counted_right(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "COUNT_LIMIT", CAP)
    now = timezone.now()
    found = trends.read_deaths([now - timedelta(hours=1), now - timedelta(days=7)], [now, now])
    assert [str(count) for count in found.buckets] == ["1,000+", "1,000+"]  # BAR_LIMIT
    tasks = {item.name: item for item in found.by_task}
    assert [str(tasks["storm"].last_hour), str(tasks["storm"].last_day)] == ["100+", "100+"]
    # 30 retrying jobs of task "t" in the skewed table (no deaths): fewer than the limit, exact.
    assert (str(tasks["t"].last_day), str(tasks["t"].retrying)) == ("0", "31")
    assert found.by_task[0].name == "storm"  # most deaths in the last hour first
    errors = {item.name: item for item in found.by_error}
    assert set(errors) == {"PartnerTimeout", "RareError"}


@pytest.mark.usefixtures("skewed")
def test_the_figures_are_right_on_the_skewed_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "COUNT_LIMIT", CAP)
    rows = {row.queue: row for row in console.queues()}
    assert [str(rows["default"].ready), str(rows["default"].retrying), rows["default"].running] == [
        "100+",
        "30",
        20,
    ]
    assert [str(rows["mail"].ready), str(rows["mail"].retrying), str(rows["mail"].dead)] == ["2", "1", "0"]
    assert (str(rows["rare"].dead), rows["rare"].oldest_due) == ("6", None)
    assert rows["mail"].oldest_due is not None
    assert rows["mail"].oldest_due >= timedelta(minutes=3)


@pytest.mark.usefixtures("skewed")
def test_negative_control_the_old_group_by_is_caught() -> None:
    """The dashboard used to group every job by queue and status: a whole-table read."""
    plan = explain(f"SELECT queue_name, status, count(*) FROM {JOB} GROUP BY 1, 2", {})
    with pytest.raises(AssertionError):
        assert_bounded_index_walks(plan)


@pytest.mark.usefixtures("skewed")
def test_a_status_sample_walks_the_same_indexes_and_stops() -> None:
    params = {"limit": CAP, "cap": CAP + 1, "kept": trends.SAMPLES_KEPT}
    plan = explain(trends.SAMPLE_SQL, params)
    assert_bounded_index_walks(plan)
    for index in (
        "jobretry_job_retrying",
        "jobretry_job_claim",
        "jobretry_job_lease",
        "jobretry_dead_newest",
    ):
        assert index in plan, plan
    assert plan.count("jobretry_job_retrying") == 1, plan  # counted once, used twice
    assert "Seq Scan on jobretry_status_sample" not in plan, plan


@pytest.mark.usefixtures("skewed")
def test_a_minute_already_sampled_counts_nothing() -> None:
    """The N-th worker of a minute pays one primary-key probe: every count is never executed."""
    next_minute_sampled(trends.take_sample())  # the EXPLAIN may run in the next minute: sampled too
    params = {"limit": CAP, "cap": CAP + 1, "kept": trends.SAMPLES_KEPT}
    plan = explain(trends.SAMPLE_SQL, params)
    assert "Index Only Scan using jobretry_status_sample_pkey" in plan, plan
    for line in plan.splitlines():
        if " on django_jobretry_" in line:
            assert "(never executed)" in line, plan


def test_the_sample_charts_read_a_range_of_the_primary_key_per_bar() -> None:
    """Seven days of samples (the retention): each of the 24 hourly bars reads its own 60."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {trends.SAMPLES} (taken_at, count_limit, ready, retrying, running, dead)
                SELECT date_trunc('minute', now()) - g * interval '1 minute', 10000, 0,
                       g % 50, 0, LEAST(g, 10001)
                FROM generate_series(0, 7 * 24 * 60 - 1) AS g"""
        )
        cursor.execute(f"ANALYZE {trends.SAMPLES}")
        # The bars end at the instant the samples were counted back from (the transaction's now()):
        # ended at the test's own clock, the last bar lost a sample whenever a minute turned between.
        cursor.execute("SELECT now()")
        now = cursor.fetchone()[0]
    starts = [now - timedelta(hours=h) for h in range(24, 0, -1)]
    plan = explain(trends.SAMPLE_BUCKETS_SQL, {"starts": starts, "stops": [*starts[1:], now]})
    assert "Index Scan using jobretry_status_sample_pkey on jobretry_status_sample" in plan, plan
    assert "Seq Scan" not in plan, plan
    assert "Bitmap" not in plan, plan
    assert "(actual rows=60 loops=24)" in plan, plan
