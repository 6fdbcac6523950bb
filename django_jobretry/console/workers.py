"""The workers table: each `runworker` says it is alive, and removes itself on a clean exit.

Only the worker's heartbeat thread writes here, one statement a beat
(docs/worker.md#the-workers-table): its own row is inserted or refreshed
(last heartbeat, jobs running now), and in the same statement any row whose
worker stopped heartbeating long ago is deleted, so the workers of a
crashed machine do not pile up while nobody runs a clean-up. A worker is
lost once its last heartbeat is older than its lease, by the database's
clock (docs/design.md#rule-5), when its jobs' leases have run out too; it
stays listed as lost for ``LOST_KEPT`` more, for the operator who comes to
look, then the next beat of any live worker deletes it. The cost is one
statement per heartbeat period, whatever the number of jobs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from django.db import connection
from django.db.models import DurationField, ExpressionWrapper, F
from django.db.models.functions import Now

from django_jobretry.models import WorkerProcess
from django_jobretry.models.worker_process import IS_LIVE

WORKERS = WorkerProcess._meta.db_table

#: How long a lost worker stays listed (as lost) after its lease ran out.
LOST_KEPT = timedelta(hours=1)


def package_version() -> str:
    """The installed django-jobretry version: which code each worker runs, during a rolling deploy."""
    try:
        return version("django-jobretry")
    except PackageNotFoundError:  # a source tree that is not installed
        return "0+unknown"


@dataclass(frozen=True)
class Registration:
    """What a worker says about itself; fixed for its lifetime."""

    worker_id: str
    host: str
    pid: int
    queues: Sequence[str]
    concurrency: int
    pool: str
    version: str
    lease_seconds: float


@dataclass(frozen=True)
class Beat:
    """What one beat did: when this worker's row says it started, and which lost workers it removed."""

    started_at: datetime
    removed: list[str]


#: Insert or refresh this worker's row; delete the rows of workers lost more than
#: LOST_KEPT ago (never this worker's own: a worker back from a long stall
#: refreshes its row instead). The DELETE sees the table as it was before the
#: statement, so it cannot touch the row the INSERT writes. Leases and times
#: are within the table's CHECK constraints (models/worker_process.py), so
#: ``now() - kept - lease`` stays within PostgreSQL's range.
_BEAT = f"""
    WITH me AS (
        INSERT INTO {WORKERS} AS w (worker_id, host, pid, queues, concurrency, pool, version, lease,
                                    started_at, last_heartbeat_at, running_jobs)
        VALUES (%(worker_id)s, %(host)s, %(pid)s, %(queues)s::jsonb, %(concurrency)s, %(pool)s,
                %(version)s, make_interval(secs => %(lease)s),
                COALESCE(%(started_at)s::timestamptz, statement_timestamp()), statement_timestamp(),
                %(running)s)
        ON CONFLICT (worker_id) DO UPDATE
        SET last_heartbeat_at = EXCLUDED.last_heartbeat_at, running_jobs = EXCLUDED.running_jobs
        RETURNING w.started_at
    ), gone AS (
        DELETE FROM {WORKERS}
        WHERE worker_id <> %(worker_id)s
          AND last_heartbeat_at < statement_timestamp() - %(kept)s - lease
        RETURNING worker_id
    )
    SELECT (SELECT started_at FROM me), ARRAY(SELECT worker_id FROM gone ORDER BY worker_id)
"""


def beat(registration: Registration, running: int, started_at: datetime | None = None) -> Beat:
    """Say this worker is alive with ``running`` jobs; remove workers lost more than LOST_KEPT ago.

    The first beat registers the worker; pass the ``started_at`` it returned
    to every later one, so a worker whose row was removed while it stalled
    comes back with its real start time.
    """
    params: dict[str, Any] = {
        "worker_id": registration.worker_id,
        "host": registration.host,
        "pid": registration.pid,
        "queues": json.dumps(list(registration.queues)),
        "concurrency": registration.concurrency,
        "pool": registration.pool,
        "version": registration.version,
        "lease": registration.lease_seconds,
        "started_at": started_at,
        "running": running,
        "kept": LOST_KEPT,
    }
    with connection.cursor() as cursor:
        cursor.execute(_BEAT, params)
        started, removed = cursor.fetchone()
    return Beat(started_at=started, removed=list(removed))


def unregister(worker_id: str) -> bool:
    """Remove this worker's row on a clean exit; whether there was one."""
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {WORKERS} WHERE worker_id = %s", [worker_id])
        return bool(cursor.rowcount)


@dataclass(frozen=True)
class WorkerState:
    """A row of the workers table as operators see it: live or lost, by the database clock."""

    worker_id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    pool: str
    version: str
    lease: timedelta
    started_at: datetime
    last_heartbeat_at: datetime
    running_jobs: int
    live: bool
    heartbeat_age: timedelta


#: The columns a WorkerState reads as they are (``live`` and ``heartbeat_age`` are computed).
_COLUMNS = (
    "worker_id",
    "host",
    "pid",
    "queues",
    "concurrency",
    "pool",
    "version",
    "lease",
    "started_at",
    "last_heartbeat_at",
    "running_jobs",
)


def listing(limit: int = 200) -> list[WorkerState]:
    """Up to ``limit`` workers, live ones first, each oldest first."""
    rows = (
        WorkerProcess.objects.annotate(
            live=IS_LIVE,
            heartbeat_age=ExpressionWrapper(Now() - F("last_heartbeat_at"), output_field=DurationField()),
        )
        .order_by("-live", "started_at", "id")
        .values(*_COLUMNS, "live", "heartbeat_age")
    )
    return [WorkerState(**row) for row in rows[:limit]]


def queue_list(queues: list[str]) -> str:
    """A worker's queues as operators read them: "all" for none named."""
    return ", ".join(queues) or "all"
