"""The dashboard's figures over time: deaths as they happened, and the totals sampled each minute.

**Deaths**, the dashboard's answer to "what is dying, and why": per time
bucket, per task and per error class, and what retries now. They are counted
from the Death rows each burial appends (models/dead_letter.py), not from the
dead letters kept: a requeue or a discard does not bring the dead back to
life, so an hour's count never falls. Like the rest of the dashboard
(console/__init__.py), every figure is an index walk that stops early:

- a bucket counts the ``jobretry_death_at`` range of its hour or day, up to
  BAR_LIMIT + 1 entries;
- the task names (and error classes) are found by skipping through
  ``jobretry_death_task`` (``jobretry_death_error``), one probe per name kept
  (a week's worth), and each name's last hour and last 24 hours are ranges
  of that index, up to COUNT_LIMIT + 1 entries;
- the jobs retrying now are the first COUNT_LIMIT + 1 entries of the
  retrying index (``jobretry_job_retrying``), grouped by task: with more than
  that retrying, each task's count is a lower bound, shown as "n+".

:func:`read_deaths` runs its three statements in one ``console.index_walks()``
block: one round trip each.

**Samples**: the jobs and dead-letter tables hold only the state now, so
"how many jobs were retrying an hour ago" needs a history of the totals
(models/status_sample.py), one sample a minute, taken by whichever worker
beats first. Every worker's heartbeat thread calls :func:`take_sample` on
each beat; one statement inserts the current minute's sample only when it is
missing, so a minute is counted once whatever the number of workers: the
``NOT EXISTS`` skips the counts when the minute is already there, and ``ON
CONFLICT DO NOTHING`` settles the two workers that count it at the same
instant (both count, one row is written). The worker that wrote the minute
also deletes the samples, and the deaths above, older than ``SAMPLES_KEPT``,
in the same statement. The counts are the dashboard's index walks over the
whole tables, each stopping after COUNT_LIMIT + 1 rows, so a sample costs the
same on a million jobs as on ten; it runs with bitmap and sequential scans
off, as the dashboard's do. Minutes use the database clock
(docs/design.md#rule-5). With no worker running, nothing is sampled: the
dashboard shows those minutes as gaps, never as zeros. It reads the samples
per chart bar (:func:`samples_per_bucket`): one range scan of the primary key
(taken_at) per bar.

tests/integration/console/test_status_plans.py checks the plans of both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django_jobretry import console
from django_jobretry.console import RETRYING, RETRYING_ORDER, counted
from django_jobretry.jobs.sql import CLAIM_ORDER, DEAD, DEATHS, JOB
from django_jobretry.models import StatusSample

# -- deaths, as they happened ----------------------------------------------------------------------

#: Deaths with ``starts[i] <= died_at < stops[i]``, each bucket counted up to %(bar)s entries.
DEATH_BUCKETS_SQL = f"""
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
            SELECT j.task_name FROM {JOB} AS j WHERE {RETRYING} ORDER BY {RETRYING_ORDER} LIMIT %(cap)s
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
                                  ORDER BY {RETRYING_ORDER} LIMIT %(cap)s) AS c)
"""


@dataclass(frozen=True)
class Recent:
    """The admin index's line: deaths in the last hour and 24 hours, jobs retrying now."""

    last_hour: console.Count
    last_day: console.Count
    retrying: console.Count


def recent() -> Recent:
    """Deaths in the last hour and 24 hours and the jobs retrying now: one statement."""
    with console.index_walks() as cursor:
        cursor.execute(RECENT_SQL, {"cap": console.COUNT_LIMIT + 1})
        hour, day, retrying = cursor.fetchone()
    return Recent(console.Count.capped(hour), console.Count.capped(day), console.Count.capped(retrying))


@dataclass(frozen=True)
class Dying:
    """One task or error class: its deaths in the last hour and 24 hours, and (tasks) retrying now."""

    name: str
    last_hour: console.Count
    last_day: console.Count
    retrying: console.Count | None = None

    def order(self) -> tuple[int, int, int, str]:
        """Most deaths in the last hour first, then in 24 hours, then most retrying."""
        retrying = 0 if self.retrying is None else self.retrying.value or 0
        return (-(self.last_hour.value or 0), -(self.last_day.value or 0), -retrying, self.name)


@dataclass(frozen=True)
class Deaths:
    """The deaths of each bucket asked for, and what is dying per task and per error class."""

    buckets: list[console.Count]
    by_task: list[Dying]
    by_error: list[Dying]


def read_deaths(starts: Sequence[datetime], stops: Sequence[datetime]) -> Deaths:
    """The deaths with ``starts[i] <= died_at < stops[i]`` for each i, per task and per error class."""
    cap = console.COUNT_LIMIT + 1
    with console.index_walks() as cursor:
        params = {"bar": console.BAR_LIMIT + 1, "starts": list(starts), "stops": list(stops)}
        cursor.execute(DEATH_BUCKETS_SQL, params)
        buckets = [console.Count.capped(n, console.BAR_LIMIT) for (n,) in cursor.fetchall()]
        cursor.execute(BY_TASK_SQL, {"cap": cap, "limit": console.COUNT_LIMIT})
        tasks = cursor.fetchall()
        cursor.execute(BY_ERROR_SQL, {"cap": cap})
        errors = cursor.fetchall()
    by_task = [
        Dying(name, console.Count.capped(hour), console.Count.capped(day), console.Count(retrying, more))
        for name, hour, day, retrying, more in tasks
    ]
    by_error = [
        Dying(name, console.Count.capped(hour), console.Count.capped(day)) for name, hour, day in errors
    ]
    return Deaths(buckets, sorted(by_task, key=Dying.order), sorted(by_error, key=Dying.order))


# -- samples of the totals, one a minute ----------------------------------------------------------

SAMPLES = StatusSample._meta.db_table

#: How long samples are kept: the dashboard shows the last 24 hours; a week
#: leaves room to look back over a weekend. At one a minute, 10,080 rows.
SAMPLES_KEPT = timedelta(days=7)

#: Ready rows, counted up to twice the cap: less the retrying ones (at most the
#: cap, or the ready count is unknown anyway), that leaves at least the cap.
_WAITING = counted(f"{JOB} AS j WHERE j.status = 'ready'", CLAIM_ORDER, "2 * %(cap)s")

#: Insert this minute's sample unless a worker already did; if this statement
#: wrote it, delete the samples older than %(kept)s. The counts are in the
#: select list of a query over ``due``, which is empty when the minute exists:
#: then none of them runs. The DELETE sees the table as it was before the
#: statement, so it cannot touch the new row.
SAMPLE_SQL = f"""
    WITH due AS (
        SELECT m.taken_at FROM (SELECT date_trunc('minute', statement_timestamp()) AS taken_at) AS m
        WHERE NOT EXISTS (SELECT 1 FROM {SAMPLES} AS s WHERE s.taken_at = m.taken_at)
    ), counted AS MATERIALIZED (  -- each count once, though used twice below
        SELECT due.taken_at,
               {counted(f"{JOB} AS j WHERE {RETRYING}", RETRYING_ORDER)} AS retrying,
               {_WAITING} AS waiting,
               {counted(f"{JOB} AS j WHERE j.status = 'running'", "j.lease_expires_at")} AS running,
               {counted(f"{DEAD} AS d", "d.dead_at DESC, d.id DESC")} AS dead
        FROM due
    ), inserted AS (
        INSERT INTO {SAMPLES} (taken_at, count_limit, ready, retrying, running, dead)
        SELECT taken_at, %(limit)s,
               CASE WHEN retrying <= %(limit)s THEN LEAST(waiting - retrying, %(cap)s) END,
               retrying, running, dead
        FROM counted
        ON CONFLICT (taken_at) DO NOTHING
        RETURNING taken_at
    ), pruned AS (
        DELETE FROM {SAMPLES}
        WHERE taken_at < statement_timestamp() - %(kept)s AND EXISTS (SELECT 1 FROM inserted)
        RETURNING taken_at
    ), forgotten AS (  -- the deaths counted for the charts (models/dead_letter.py), kept as long
        DELETE FROM {DEATHS}
        WHERE died_at < statement_timestamp() - %(kept)s AND EXISTS (SELECT 1 FROM inserted)
    )
    SELECT (SELECT taken_at FROM inserted), (SELECT count(*) FROM pruned)
"""

#: Per bar: how many samples, and the highest retrying and dead counts among them.
#: Each bar is one range scan of the primary key.
SAMPLE_BUCKETS_SQL = f"""
    SELECT x.samples, x.retrying, x.retrying_more, x.dead, x.dead_more
    FROM unnest(%(starts)s::timestamptz[], %(stops)s::timestamptz[]) WITH ORDINALITY AS b(start, stop, i)
    CROSS JOIN LATERAL (
        SELECT count(*) AS samples,
               max(LEAST(s.retrying, s.count_limit)) AS retrying,
               COALESCE(bool_or(s.retrying > s.count_limit), false) AS retrying_more,
               max(LEAST(s.dead, s.count_limit)) AS dead,
               COALESCE(bool_or(s.dead > s.count_limit), false) AS dead_more
        FROM {SAMPLES} AS s WHERE s.taken_at >= b.start AND s.taken_at < b.stop
    ) AS x
    ORDER BY b.i
"""


@dataclass(frozen=True)
class Taken:
    """What a :func:`take_sample` did: the minute it wrote (None: already there), samples deleted."""

    taken_at: datetime | None
    pruned: int


def take_sample() -> Taken:
    """Sample this minute's totals unless some worker already has; prune what is past SAMPLES_KEPT."""
    params = {"limit": console.COUNT_LIMIT, "cap": console.COUNT_LIMIT + 1, "kept": SAMPLES_KEPT}
    with console.index_walks(commit=True) as cursor:
        cursor.execute(SAMPLE_SQL, params)
        taken_at, pruned = cursor.fetchone()
    return Taken(taken_at, pruned)


@dataclass(frozen=True)
class Bucket:
    """The samples of one bar: how many, and the highest retrying and dead counts (None: no sample)."""

    samples: int
    retrying: console.Count | None
    dead: console.Count | None


def samples_per_bucket(starts: Sequence[datetime], stops: Sequence[datetime]) -> list[Bucket]:
    """The samples with ``starts[i] <= taken_at < stops[i]``, for each i."""
    with console.index_walks() as cursor:
        cursor.execute(SAMPLE_BUCKETS_SQL, {"starts": list(starts), "stops": list(stops)})
        rows = cursor.fetchall()
    return [
        Bucket(samples, console.Count(retrying, retrying_more), console.Count(dead, dead_more))
        if samples
        else Bucket(0, None, None)
        for samples, retrying, retrying_more, dead, dead_more in rows
    ]


def latest_sample() -> datetime | None:
    """When the newest sample was taken; None: no sample (no worker has run since SAMPLES_KEPT)."""
    return StatusSample.objects.order_by("-taken_at").values_list("taken_at", flat=True).first()
