"""What is dying: deaths per time bucket, per task and per error class, and what retries now.

The dashboard's answer to "what is dying, and why". Deaths are counted from
the Death rows each burial appends (models/dead_letter.py), not from the dead
letters kept: a requeue or a discard does not bring the dead back to life,
so an hour's count never falls. Like the rest of the dashboard
(console/status.py), every figure is an index walk that stops early:

- a bucket counts the ``jobretry_death_at`` range of its hour or day, up to
  BAR_LIMIT + 1 entries;
- the task names (and error classes) are found by skipping through
  ``jobretry_death_task`` (``jobretry_death_error``), one probe per name kept
  (a week's worth), and each name's last hour and last 24 hours are ranges
  of that index, up to COUNT_LIMIT + 1 entries;
- the jobs retrying now are the first COUNT_LIMIT + 1 entries of the
  retrying index (``jobretry_job_retrying``), grouped by task: with more than
  that retrying, each task's count is a lower bound, shown as "n+".

All three statements run in one ``status.index_walks()`` block: one round
trip each. tests/integration/console/test_status_plans.py checks their plans.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django_jobretry.console import status
from django_jobretry.console.status import RETRYING
from django_jobretry.jobs.sql import DEATHS, JOB

#: Deaths with ``starts[i] <= died_at < stops[i]``, each bucket counted up to %(bar)s entries.
BUCKETS_SQL = f"""
    SELECT (SELECT count(*) FROM (
               SELECT 1 FROM {DEATHS} AS d WHERE d.died_at >= b.start AND d.died_at < b.stop
               ORDER BY d.died_at LIMIT %(bar)s) AS c)
    FROM unnest(%(starts)s::timestamptz[], %(stops)s::timestamptz[]) WITH ORDINALITY AS b(start, stop, i)
    ORDER BY b.i
"""


def _since(column: str, interval: str) -> str:
    """The deaths of the name ``names.n`` in the last ``interval``, counted up to %(cap)s entries."""
    return (
        f"(SELECT count(*) FROM (SELECT 1 FROM {DEATHS} AS d WHERE d.{column} = names.n "
        f"AND d.died_at >= statement_timestamp() - interval '{interval}' "
        f"ORDER BY d.died_at LIMIT %(cap)s) AS c)"
    )


def _per_name(column: str) -> str:
    """Each ``column`` value with deaths kept: its deaths in the last hour and the last 24 hours."""
    return f"""
        WITH RECURSIVE names(n) AS (
            (SELECT {column} FROM {DEATHS} ORDER BY {column} LIMIT 1)
            UNION ALL
            SELECT (SELECT d.{column} FROM {DEATHS} AS d WHERE d.{column} > names.n
                    ORDER BY d.{column} LIMIT 1)
            FROM names WHERE names.n IS NOT NULL
        )
        SELECT names.n, {_since(column, "1 hour")} AS hour, {_since(column, "24 hours")} AS day
        FROM names WHERE names.n IS NOT NULL
    """


#: Per task: deaths in the last hour and 24 hours, and jobs retrying now (of the first %(cap)s).
BY_TASK_SQL = f"""
    WITH dying AS ({_per_name("task_name")}),
    retrying AS (
        SELECT r.task_name AS n, count(*) AS retrying FROM (
            SELECT j.task_name FROM {JOB} AS j WHERE {RETRYING} ORDER BY j.queue_name, j.run_at LIMIT %(cap)s
        ) AS r GROUP BY r.task_name
    )
    SELECT n, COALESCE(dying.hour, 0), COALESCE(dying.day, 0), COALESCE(retrying.retrying, 0),
           (SELECT COALESCE(sum(retrying), 0) FROM retrying) > %(limit)s
    FROM dying FULL JOIN retrying USING (n)
    WHERE COALESCE(dying.day, 0) > 0 OR retrying.retrying > 0
"""

#: Per error class of the last error: deaths in the last hour and 24 hours.
BY_ERROR_SQL = f"""
    SELECT n, hour, day FROM ({_per_name("error_class")}) AS dying WHERE day > 0
"""


#: Deaths in the last hour and the last 24 hours, and jobs retrying now, each up to %(cap)s entries.
RECENT_SQL = f"""
    SELECT (SELECT count(*) FROM (SELECT 1 FROM {DEATHS} AS d
                                  WHERE d.died_at >= statement_timestamp() - interval '1 hour'
                                  ORDER BY d.died_at LIMIT %(cap)s) AS c),
           (SELECT count(*) FROM (SELECT 1 FROM {DEATHS} AS d
                                  WHERE d.died_at >= statement_timestamp() - interval '24 hours'
                                  ORDER BY d.died_at LIMIT %(cap)s) AS c),
           (SELECT count(*) FROM (SELECT 1 FROM {JOB} AS j WHERE {RETRYING}
                                  ORDER BY j.queue_name, j.run_at LIMIT %(cap)s) AS c)
"""


@dataclass(frozen=True)
class Recent:
    """The admin index's line: deaths in the last hour and 24 hours, jobs retrying now."""

    last_hour: status.Count
    last_day: status.Count
    retrying: status.Count


def recent() -> Recent:
    """Deaths in the last hour and 24 hours and the jobs retrying now: one statement."""
    with status.index_walks() as cursor:
        cursor.execute(RECENT_SQL, {"cap": status.COUNT_LIMIT + 1})
        hour, day, retrying = cursor.fetchone()
    return Recent(status.Count.capped(hour), status.Count.capped(day), status.Count.capped(retrying))


@dataclass(frozen=True)
class Dying:
    """One task or error class: its deaths in the last hour and 24 hours, and (tasks) retrying now."""

    name: str
    last_hour: status.Count
    last_day: status.Count
    retrying: status.Count | None = None

    def order(self) -> tuple[int, int, int, str]:
        """Most deaths in the last hour first, then in 24 hours, then most retrying."""
        retrying = 0 if self.retrying is None else self.retrying.value or 0
        return (-(self.last_hour.value or 0), -(self.last_day.value or 0), -retrying, self.name)


@dataclass(frozen=True)
class Deaths:
    """The deaths of each bucket asked for, and what is dying per task and per error class."""

    buckets: list[status.Count]
    by_task: list[Dying]
    by_error: list[Dying]


def read(starts: Sequence[datetime], stops: Sequence[datetime]) -> Deaths:
    """The deaths with ``starts[i] <= died_at < stops[i]`` for each i, per task and per error class."""
    cap = status.COUNT_LIMIT + 1
    with status.index_walks() as cursor:
        params = {"bar": status.BAR_LIMIT + 1, "starts": list(starts), "stops": list(stops)}
        cursor.execute(BUCKETS_SQL, params)
        buckets = [status.Count.capped(n, status.BAR_LIMIT) for (n,) in cursor.fetchall()]
        cursor.execute(BY_TASK_SQL, {"cap": cap, "limit": status.COUNT_LIMIT})
        tasks = cursor.fetchall()
        cursor.execute(BY_ERROR_SQL, {"cap": cap})
        errors = cursor.fetchall()
    by_task = [
        Dying(name, status.Count.capped(hour), status.Count.capped(day), status.Count(retrying, more))
        for name, hour, day, retrying, more in tasks
    ]
    by_error = [
        Dying(name, status.Count.capped(hour), status.Count.capped(day)) for name, hour, day in errors
    ]
    return Deaths(buckets, sorted(by_task, key=Dying.order), sorted(by_error, key=Dying.order))
