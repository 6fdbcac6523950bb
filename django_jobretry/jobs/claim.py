"""The claim, and a claimed job's other transitions: finish, release, heartbeat; bury and revive.

Each runs one statement of statements.py, which says how they are fenced and
timed; writing a failed attempt back is in failures.py, lease recovery in recovery.py.
A worker calls one :meth:`Claims.claim`: the ordinary claim, with its successes and
retries riding on it, then, while limits are declared, the limited one (LIMITED_CLAIM
over jobretry_pick_limited, functions.sql). With no limit declared anywhere
(limits/declare.claim_limits is None) no extra statement runs and the ordinary claim has
no lane filter: a capability not declared costs nothing. Otherwise the ordinary claim
leaves jobs with a lane to the limited one. When a rate held a job back, the loop is
told when its next token comes, so it claims again then, not a poll interval later.
"""

from __future__ import annotations

import heapq
import json
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.db import connection

from django_jobretry.jobs import statements
from django_jobretry.jobs.claimed import ClaimedJob, FailedAttempt, Succeeded
from django_jobretry.jobs.history import AttemptEntry
from django_jobretry.jobs.sql import named_rows
from django_jobretry.limits.declare import claim_limits
from django_jobretry.models import DeadReason

#: ClaimedJob is claim()'s result type, so it is exported here too.
__all__ = [
    "Burial",
    "ClaimedJob",
    "Claims",
    "Revival",
    "Written",
    "bury",
    "claim",
    "claim_limited",
    "claimed_jobs",
    "fence_arrays",
    "heartbeat",
    "release",
    "revive",
    "succeed",
    "succeed_and_claim",
]

#: The columns of a claimed row that are ClaimedJob's fields (the rest order the claim).
CLAIMED_FIELDS = tuple(field.name for field in fields(ClaimedJob) if field.init)


class Written(set[int]):
    """The ids a statement wrote the outcome of (they still held their lease), and its time: the
    ``finished_at`` of every success it wrote, which a django.tasks result carries (None: no statement)."""

    def __init__(self, ids: Iterable[int] = (), finished_at: datetime | None = None) -> None:
        super().__init__(ids)
        self.finished_at = finished_at


@dataclass(frozen=True)
class Burial:
    """A job moved into the dead letters: which one it became, and how often it was requeued before."""

    dead_letter_id: int
    requeue_count: int


def claimed_jobs(rows: Sequence[Mapping[str, Any]]) -> list[ClaimedJob]:
    """The rows CLAIM_PICKED returned, by column name, in claim order (priority, then run_at, then id)."""
    # run_at as epoch seconds: a '-infinity' row must not fail the batch's decoding.
    ordered = sorted(rows, key=lambda row: (-row["priority"], row["run_at_epoch"], row["id"]))
    # Arguments stay undecoded here: the runner decodes them, one job at a time.
    return [ClaimedJob(**{name: row[name] for name in CLAIMED_FIELDS}) for row in ordered]


def _claim_params(
    owner: str, limit: int, lease_seconds: float, queues: Sequence[str] | None
) -> dict[str, Any]:
    return {"queues": list(queues or []), "limit": limit, "owner": owner, "lease": lease_seconds}


def claim(
    owner: str,
    limit: int,
    lease_seconds: float,
    queues: Sequence[str] | None,
    *,
    task_names: Sequence[str] | None = None,
    skip: Collection[int] = (),
    skip_lanes: bool = False,
) -> list[ClaimedJob]:
    """Claim up to ``limit`` due jobs; the attempt is counted here (docs/design.md#rule-1).

    ``skip_lanes``: leave limited jobs to :func:`claim_limited` (while limits are declared).
    """
    sql = statements.claim_sql(
        filter_queues=bool(queues), filter_tasks=bool(task_names), skip_ids=bool(skip), skip_lanes=skip_lanes
    )
    params = {
        **_claim_params(owner, limit, lease_seconds, queues),
        "tasks": list(task_names or []),
        "skip": list(skip),
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return claimed_jobs(named_rows(cursor))


def claim_limited(
    owner: str, limit: int, lease_seconds: float, queues: Sequence[str] | None, limits: Mapping[str, Any]
) -> tuple[list[ClaimedJob], float | None]:
    """Claim up to ``limit`` due limited jobs while ``limits`` (limits/declare.claim_limits) have room.

    Returns the jobs and the seconds until a rate lets the next one start
    (None: no job was held by a rate), jobs/statements.py.
    """
    params = {**_claim_params(owner, limit, lease_seconds, queues), "limits": json.dumps(limits)}
    params["queues"] = list(queues) if queues else None
    with connection.cursor() as cursor:
        cursor.execute(statements.LIMITED_CLAIM, params)
        rows = named_rows(cursor)
    wait = rows[0]["rate_wait"] if rows else None
    return claimed_jobs([row for row in rows if row["id"] is not None]), wait


def fence_arrays(jobs: Sequence[ClaimedJob]) -> dict[str, Any]:
    return {
        "ids": [job.id for job in jobs],
        "attempts": [job.attempt for job in jobs],
        "tokens": [job.token for job in jobs],
    }


def _succeed_params(jobs: Sequence[ClaimedJob], results: Mapping[int, str] | None) -> dict[str, Any]:
    results = results or {}
    return {**fence_arrays(jobs), "results": [results.get(job.id) for job in jobs]}


def succeed(jobs: Sequence[ClaimedJob], results: Mapping[int, str] | None = None) -> Written:
    """Mark finished attempts succeeded in one statement; returns the ids that still held their lease.

    ``results`` maps a job id to the JSON text its task returned (django.tasks
    keeps results; ``@job`` does not). The worker that ran the last attempt
    stays on the row as ``lease_owner``: who ran a finished job is history,
    and a task result lists it.
    """
    if not jobs:
        return Written()
    with connection.cursor() as cursor:
        cursor.execute(statements.SUCCEED, _succeed_params(jobs, results))
        rows = cursor.fetchall()
    return Written((row[0] for row in rows), rows[0][1] if rows else None)


def succeed_and_claim(
    jobs: Sequence[ClaimedJob],
    results: Mapping[int, str] | None,
    *,
    owner: str,
    limit: int,
    lease_seconds: float,
    queues: Sequence[str] | None,
    retries: Mapping[str, Any] | None = None,
    skip_lanes: bool = False,
) -> tuple[Written, list[ClaimedJob]]:
    """:func:`succeed`, the ``retries`` and then :func:`claim`, in one statement: one round trip, one commit.

    ``retries`` are the parameters of statements.schedule_retries_sql, prefixed
    ``retry_`` (failures.retry_params). Returns the ids (succeeded or
    retried) that still held their lease, and the jobs claimed.
    """
    params = {
        **_succeed_params(jobs, results),
        **_claim_params(owner, limit, lease_seconds, queues),
        **(retries or {}),
    }
    sql = statements.succeed_and_claim_sql(
        filter_queues=bool(queues), with_retries=bool(retries), skip_lanes=skip_lanes
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = named_rows(cursor)
    written = Written(rows[0]["ids"] or (), rows[0]["finished_at"]) if rows else Written()
    return written, claimed_jobs([row for row in rows if row["id"] is not None])


def release(jobs: Sequence[ClaimedJob]) -> set[int]:
    """Give back jobs claimed but never started: ready again, the attempt uncounted.

    Not a job an operator asked to cancel: it stays claimed, and lease
    recovery buries it as "cancelled" once the releasing worker is gone
    (jobs/recovery.py), so it never starts.
    """
    if not jobs:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(statements.release_sql(), fence_arrays(jobs))
        return {row[0] for row in cursor.fetchall()}


def heartbeat(jobs: Sequence[ClaimedJob], lease_seconds: float) -> dict[int, str]:
    """Extend the leases still held; returns id -> who asked to cancel it ("" if nobody).

    A missing id lost its lease. A cancel request rides on the heartbeat, so
    asking a running job to stop costs the worker no query of its own.
    """
    if not jobs:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(statements.heartbeat_sql(), {**fence_arrays(jobs), "lease": lease_seconds})
        return dict(cursor.fetchall())


def bury(job: ClaimedJob, entry: AttemptEntry, reason: DeadReason, history_limit: int) -> Burial | None:
    """Move the running job into the dead letters in one fenced statement.

    Returns the burial, or None when the attempt no longer held its lease.
    """
    params: dict[str, Any] = {
        "id": job.id,
        "attempt": job.attempt,
        "token": job.token,
        "entry": json.dumps(entry),
        "reason": reason.value,
        "history": history_limit,
        "error_class": entry["error_class"],
        "message": entry["message"],
    }
    with connection.cursor() as cursor:
        cursor.execute(statements.bury_sql(), params)
        rows = named_rows(cursor)
    return Burial(rows[0]["dead_letter_id"], rows[0]["requeue_count"]) if rows else None


@dataclass(frozen=True, slots=True)
class Revival:
    """What became of one dead letter of a :func:`revive`: ``job_id`` None if a unique index refused it."""

    dead_letter_id: int
    job_id: int | None
    unique_key: str | None
    requeue_count: int
    #: Refused because a succeeded job holds the key for its unique_for: until when.
    taken_until: datetime | None


def revive(
    allowed: Mapping[int, int], *, run_after: timedelta | None, actor: str, guarded: bool = True
) -> list[Revival]:
    """The inverse of bury, for a set: each dead letter becomes a ready job, in one statement.

    ``allowed`` maps each dead letter's id to the max_attempts its job gets.
    Each new job carries the history of its dead letter plus one
    :class:`~django_jobretry.jobs.history.RequeueEntry`. Returns one
    Revival per dead letter that still existed, in id order; one whose key a
    live job holds (or a lower id of the set took) stays a dead letter, with
    ``job_id`` None. The caller holds the rows' locks (or accepts that one
    may be gone by the time the statement runs). ``guarded=False``: the
    caller knows no dead letter of the set has a unique_key or a schedule
    slot (statements.revive_sql).
    """
    ids = sorted(allowed)
    params: dict[str, Any] = {
        "ids": ids,
        "allowed": [allowed[i] for i in ids],
        "delay": run_after.total_seconds() if run_after is not None else 0,
        "actor": actor,
    }
    with connection.cursor() as cursor:
        cursor.execute(statements.revive_sql(guarded=guarded), params)
        return [Revival(*row) for row in cursor.fetchall()]


class Riders(Protocol):
    """What rides on the ordinary claim: the Recorder's writes (jobs/record.py, which imports this module)."""

    #: When the next claim is due (time.monotonic(), a heap): the recorder's retries, a rate's next token.
    retries_due: list[float]

    def record_successes(self, outcomes: Sequence[Succeeded]) -> None: ...

    def record_successes_and_claim(
        self,
        outcomes: Sequence[Succeeded],
        *,
        retries: Sequence[FailedAttempt],
        limit: int,
        lease_seconds: float,
        queues: Sequence[str] | None,
        skip_lanes: bool,
    ) -> list[ClaimedJob]: ...


class Claims:
    """One worker's claim: the ordinary statement, outcomes riding on it, then the limited one."""

    def __init__(
        self, owner: str, lease_seconds: float, queues: Sequence[str] | None, riders: Riders
    ) -> None:
        self.owner, self.lease_seconds, self.queues, self.riders = owner, lease_seconds, queues, riders
        self.limits: dict[str, Any] | None = claim_limits()

    def claim(
        self, free: int, succeeded: Sequence[Succeeded] = (), retries: Sequence[FailedAttempt] = ()
    ) -> Iterator[list[ClaimedJob]]:
        """Up to ``free`` jobs; ``succeeded`` and ``retries`` are written in the ordinary claim's statement.

        Yields the ordinary claim's jobs, then the limited claim's, each batch
        before the next statement runs: that one may fail, and the jobs of a
        batch are the caller's either way. When a rate held a limited job
        back, the time of its next token joins ``riders.retries_due``: the
        loop claims again then.
        """
        lanes = self.limits is not None
        claimed: list[ClaimedJob] = []
        if (succeeded and free) or retries:
            claimed = self.riders.record_successes_and_claim(
                succeeded,
                retries=retries,
                limit=free,
                lease_seconds=self.lease_seconds,
                queues=self.queues,
                skip_lanes=lanes,
            )
        elif succeeded:
            self.riders.record_successes(succeeded)
        elif free:
            claimed = claim(self.owner, free, self.lease_seconds, self.queues, skip_lanes=lanes)
        yield claimed
        free -= len(claimed)
        if self.limits is None or free <= 0:
            return
        jobs, wait = claim_limited(self.owner, free, self.lease_seconds, self.queues, self.limits)
        if wait is not None:
            heapq.heappush(self.riders.retries_due, time.monotonic() + wait)
        yield jobs
