"""The claim: a worker's one :meth:`Claims.claim`, the statements it runs, and when to claim next.

The ordinary claim (claim_sql, statements.py), with the worker's successes and
retries riding on it (succeed_and_claim_sql), then, while limits are declared,
the limited one (LIMITED_CLAIM over jobretry_pick_limited, functions.sql). With no
limit declared anywhere (limits.claim_limits is None) no extra statement runs
and the ordinary claim has no lane filter: a capability not declared costs nothing.
Otherwise the ordinary claim leaves jobs with a lane to the limited one. When a rate
held a job back, the loop is told when its next token comes, so it claims again then,
not a poll interval later. The rows come back as ClaimedJobs (claimed.py, which also
holds the fenced writes on a claimed job: succeed, release, heartbeat, bury).
"""

from __future__ import annotations

import heapq
import json
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, Protocol

from django.db import connection

from django_jobretry.jobs import statements
from django_jobretry.jobs.claimed import (
    ClaimedJob,
    FailedAttempt,
    Succeeded,
    Written,
    claimed_jobs,
    succeed_params,
)
from django_jobretry.jobs.sql import named_rows
from django_jobretry.limits import claim_limits


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
    """Claim up to ``limit`` due limited jobs while ``limits`` (limits.claim_limits) have room.

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
    """claimed.succeed, the ``retries`` and then :func:`claim`, in one statement: one round trip, one commit.

    ``retries`` are the parameters of statements.schedule_retries_sql, prefixed
    ``retry_`` (failures.retry_params). Returns the ids (succeeded or
    retried) that still held their lease, and the jobs claimed.
    """
    params = {
        **succeed_params(jobs, results),
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

    def claim_tasks(self, limit: int, task_names: Collection[str]) -> list[ClaimedJob]:
        """Up to ``limit`` due jobs of ``task_names`` only: the worker's event loop has room for them."""
        lanes = self.limits is not None
        return claim(
            self.owner,
            limit,
            self.lease_seconds,
            self.queues,
            task_names=sorted(task_names),
            skip_lanes=lanes,
        )

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


class ClaimSchedule:
    """When the main loop claims: when woken, when its poll is due, or when a retry it scheduled is.

    A LISTEN notification or a finished job wakes the loop at once. Jobs that
    become due later send nothing, so an idle worker finds them by polling every
    POLL_SECONDS (docs/design.md#rule-9). Its own retries are the exception it
    can foresee: the Recorder remembers when each comes due (``retries_due``, a
    heap of time.monotonic() values), and the loop claims then, so a retry after
    1 ms does not wait a whole poll interval.
    """

    def __init__(self, poll_seconds: float, retries_due: list[float]) -> None:
        self.poll_seconds = poll_seconds
        self.retries_due = retries_due
        self.next_poll = 0.0  # claim at once on start

    def next_at(self) -> float:
        """The monotonic time of the next claim, unless something wakes the loop first."""
        return min(self.next_poll, self.retries_due[0]) if self.retries_due else self.next_poll

    def due(self, now: float) -> bool:
        return now >= self.next_at()

    def claimed(self, started: float) -> None:
        """A claim ran at ``started``: poll again in POLL_SECONDS; the retries due by then were claimable."""
        self.next_poll = started + self.poll_seconds
        while self.retries_due and self.retries_due[0] <= started:
            heapq.heappop(self.retries_due)
