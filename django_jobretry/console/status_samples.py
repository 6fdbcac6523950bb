"""A history of the dashboard's totals: one sample a minute, taken by whichever worker beats first.

The jobs and dead-letter tables hold only the state now, so "how many jobs
were retrying an hour ago" needs samples (models/status_sample.py). Every
worker's heartbeat thread calls :func:`take` on each beat; one statement
inserts the current minute's sample only when it is missing, so a minute is
counted once whatever the number of workers: the ``NOT EXISTS`` skips the
counts when the minute is already there, and ``ON CONFLICT DO NOTHING``
settles the two workers that count it at the same instant (both count, one
row is written). The worker that wrote the minute also deletes the samples,
and the deaths the charts count (models/dead_letter.py), older than
``SAMPLES_KEPT``, in the same statement.

The counts are the dashboard's index walks (console/status.py) over
the whole tables, each stopping after COUNT_LIMIT + 1 rows, so a sample
costs the same on a million jobs as on ten; it runs with bitmap and
sequential scans off, as the dashboard's do. Minutes use the database clock
(docs/design.md#rule-5). With no worker running, nothing is sampled: the
dashboard shows those minutes as gaps, never as zeros.

The dashboard reads the samples per chart bar (:func:`per_bucket`): one
range scan of the primary key (taken_at) per bar.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django_jobretry.console import status
from django_jobretry.console.status import RETRYING, counted
from django_jobretry.jobs.sql import CLAIM_ORDER, DEAD, DEATHS, JOB
from django_jobretry.models import StatusSample

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
               {counted(f"{JOB} AS j WHERE {RETRYING}", "j.queue_name, j.run_at")} AS retrying,
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
BUCKETS_SQL = f"""
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
    """What one call to :func:`take` did: the minute it wrote (None: already there), samples deleted."""

    taken_at: datetime | None
    pruned: int


def take() -> Taken:
    """Sample this minute's totals unless some worker already has; prune what is past SAMPLES_KEPT."""
    params = {"limit": status.COUNT_LIMIT, "cap": status.COUNT_LIMIT + 1, "kept": SAMPLES_KEPT}
    with status.index_walks(commit=True) as cursor:
        cursor.execute(SAMPLE_SQL, params)
        taken_at, pruned = cursor.fetchone()
    return Taken(taken_at, pruned)


@dataclass(frozen=True)
class Bucket:
    """The samples of one bar: how many, and the highest retrying and dead counts (None: no sample)."""

    samples: int
    retrying: status.Count | None
    dead: status.Count | None


def per_bucket(starts: Sequence[datetime], stops: Sequence[datetime]) -> list[Bucket]:
    """The samples with ``starts[i] <= taken_at < stops[i]``, for each i."""
    with status.index_walks() as cursor:
        cursor.execute(BUCKETS_SQL, {"starts": list(starts), "stops": list(stops)})
        rows = cursor.fetchall()
    return [
        Bucket(samples, status.Count(retrying, retrying_more), status.Count(dead, dead_more))
        if samples
        else Bucket(0, None, None)
        for samples, retrying, retrying_more, dead, dead_more in rows
    ]


def latest() -> datetime | None:
    """When the newest sample was taken; None: no sample (no worker has run since SAMPLES_KEPT)."""
    return StatusSample.objects.order_by("-taken_at").values_list("taken_at", flat=True).first()
