"""A claimed job, as the worker holds it from its claim until its outcome is recorded, and its outcomes.

An attempt ends as :class:`Succeeded`, :class:`Failed` (the handler raised) or :class:`Interrupted`
(the worker shut down first); each carries what its announcement needs: nothing is read again.
Below them, the fenced writes on a claimed attempt (docs/design.md#rule-3), each one statement
of statements.py: succeed, release, heartbeat and bury. A failed attempt's retry is written by
failures.py, which decides between it and the burial.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

from django_jobretry.exceptions import UndecodableArguments
from django_jobretry.jobs import statements
from django_jobretry.jobs.history import AttemptEnd, AttemptEntry, RenderedError
from django_jobretry.jobs.sql import as_json, named_rows
from django_jobretry.models import DeadReason
from django_jobretry.policy import Classification, Decision, Retry, RetryPolicy

#: (job id, attempt): one attempt of a job. A worker may hold two attempts of one job at once, a
#: timed-out one whose thread still runs and the retry, so what it keeps per attempt is keyed by this.
type AttemptKey = tuple[int, int]


@dataclass(frozen=True)
class ClaimedJob:
    """What a worker needs to run one claimed attempt and fence its outcome.

    The arguments stay as the database sent them (jsonb text) until the
    runner thread decodes them with :meth:`arguments`: a row nested too deep
    for Python, or holding something else than a list and an object, then
    fails its own attempt, not the main loop and the rest of its batch.
    """

    id: int
    task_name: str
    queue_name: str
    policy_name: str
    raw_args: Any
    raw_kwargs: Any
    attempt: int
    max_attempts: int
    token: uuid.UUID
    #: The job id the requeue chain started from; ``id`` when never requeued.
    original_job_id: int
    requeue_count: int
    #: The schedule this job is a run of (schedules/runs.py), if any.
    schedule_name: str | None = None
    #: Times it snoozed before this attempt (``raise Snooze``), against its policy's ``max_snoozes``.
    snoozes: int = 0
    #: Seconds from the claim to the moment its retries stop (its schedule's next slot); None: never.
    retry_window: float | None = None
    #: The enqueuer's trace context as stored (jobs/tracing.py reads it warily); None: none.
    trace_context: Any = None
    #: Its workflow step (models/flow.py); None outside a flow. A step's return value is kept.
    flow_step_id: int | None = None
    #: When this worker claimed it (time.monotonic()): what is left of ``retry_window`` is measured from it.
    claimed_at: float = field(default_factory=time.monotonic, init=False, compare=False)

    def arguments(self) -> tuple[list[Any], dict[str, Any]]:
        """(args, kwargs) decoded; :class:`UndecodableArguments` says why they cannot be."""
        try:
            args, kwargs = as_json(self.raw_args), as_json(self.raw_kwargs)
        except (ValueError, RecursionError) as exc:
            raise UndecodableArguments(
                f"the arguments of job {self.id} cannot be decoded ({type(exc).__name__}); "
                "they were not written by enqueue()"
            ) from None
        # A list and an object: the jobretry_job_args_array and _kwargs_object constraints.
        return args, kwargs

    @property
    def key(self) -> AttemptKey:
        """(job id, attempt): names this attempt apart from the job's earlier and later ones."""
        return (self.id, self.attempt)

    @property
    def args(self) -> list[Any]:
        return self.arguments()[0]

    @property
    def kwargs(self) -> dict[str, Any]:
        return self.arguments()[1]


#: The columns of a claimed row that are ClaimedJob's fields (the rest order the claim).
CLAIMED_FIELDS = tuple(field.name for field in fields(ClaimedJob) if field.init)


def claimed_jobs(rows: Sequence[Mapping[str, Any]]) -> list[ClaimedJob]:
    """The rows CLAIM_PICKED returned, by column name, in claim order (priority, then run_at, then id)."""
    # run_at as epoch seconds: a '-infinity' row must not fail the batch's decoding.
    ordered = sorted(rows, key=lambda row: (-row["priority"], row["run_at_epoch"], row["id"]))
    # Arguments stay undecoded here: the runner decodes them, one job at a time.
    return [ClaimedJob(**{name: row[name] for name in CLAIMED_FIELDS}) for row in ordered]


#: Announces a success once written, given the time the statement wrote (a django.tasks task's end).
type Finish = Callable[[Succeeded, datetime], None]


@dataclass(frozen=True)
class Kept:
    """What a django.tasks task's ``func`` returns (an ``@job``'s value is kept by jobs/results.py): the
    JSON text stored as the job's return value, and what the main loop calls once the success is written
    (picklable: it comes back from a child process)."""

    result: str
    finish: Finish


@dataclass(frozen=True)
class Succeeded:
    """The handler returned; ``result`` is the JSON text kept (jobs/results.py, or a :class:`Kept`'s), if
    any, and ``finish`` what a :class:`Kept` gave."""

    job: ClaimedJob
    result: str | None = None
    finish: Finish | None = None


@dataclass(frozen=True)
class Failed:
    """The handler raised ``error``; ``ended`` says how the attempt is recorded.

    ``rendered`` is the error's text, rendered by the runner thread so that a
    slow or broken ``__str__`` never runs on the worker's main loop.
    """

    job: ClaimedJob
    error: BaseException
    ended: AttemptEnd = AttemptEnd.ERROR
    rendered: RenderedError | None = None
    #: Set when the error was classified where it was raised (a child process, or the attempt's span).
    classification: Classification | None = None
    #: The trace id of the attempt's span (jobs/tracing.py), kept in its history entry; "": none.
    trace_id: str = ""


@dataclass(frozen=True)
class Interrupted:
    """The worker shut down before the handler finished: not the job's fault.

    ``hold`` keeps the job from being claimed again while the abandoned
    handler may still run, i.e. until the shutting-down process has exited.
    """

    job: ClaimedJob
    hold: timedelta = timedelta(0)
    ended: AttemptEnd = AttemptEnd.SHUTDOWN


type Outcome = Succeeded | Failed | Interrupted


@dataclass(frozen=True)
class FailedAttempt:
    """A failed attempt from the recorder to its announcement: classified once, decided once.

    Built by the recorder with its policy's decision, or without one for a
    policy with ``retry_for`` and for a Snooze or CircuitOpen, which are
    decided under the row lock when written (jobs/failures.py). Writing it returns a copy saying
    what was written: the entry (``fallback`` when PostgreSQL refused
    ``entry``), the dead letter, or ``stale`` when the lease was lost.
    """

    job: ClaimedJob
    policy: RetryPolicy
    classification: Classification
    entry: AttemptEntry
    #: Written instead of ``entry`` when PostgreSQL refuses something in it.
    fallback: AttemptEntry
    decision: Decision | None = None
    #: Written: the lease was lost, so nothing changed (docs/design.md#rule-3).
    stale: bool = False
    dead_letter_id: int | None = None
    #: How often the dead letter's job had been requeued before it died.
    requeue_count: int = 0
    #: Who asked to cancel the job, when its retry was refused for that and it was buried instead.
    cancelled_by: str = ""
    #: The failure counts towards its policy's breaker: it is written in the transaction that counts it.
    counted: bool = False

    @property
    def retry(self) -> Retry | None:
        """The retry decided, if that is the decision."""
        return self.decision if isinstance(self.decision, Retry) else None


# -- the fenced writes on a claimed attempt ------------------------------------------------------
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


def fence_arrays(jobs: Sequence[ClaimedJob]) -> dict[str, Any]:
    return {
        "ids": [job.id for job in jobs],
        "attempts": [job.attempt for job in jobs],
        "tokens": [job.token for job in jobs],
    }


def succeed_params(jobs: Sequence[ClaimedJob], results: Mapping[int, str] | None) -> dict[str, Any]:
    results = results or {}
    return {**fence_arrays(jobs), "results": [results.get(job.id) for job in jobs]}


def succeed(jobs: Sequence[ClaimedJob], results: Mapping[int, str] | None = None) -> Written:
    """Mark finished attempts succeeded in one statement; returns the ids that still held their lease.

    ``results`` maps a job id to the JSON text its task returned, when kept
    (django.tasks tasks, ``keep_result``, flow steps). The worker that ran the last attempt
    stays on the row as ``lease_owner``: who ran a finished job is history,
    and a task result lists it.
    """
    if not jobs:
        return Written()
    with connection.cursor() as cursor:
        cursor.execute(statements.SUCCEED, succeed_params(jobs, results))
        rows = cursor.fetchall()
    return Written((row[0] for row in rows), rows[0][1] if rows else None)


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
