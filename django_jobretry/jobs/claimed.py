"""A claimed job, as the worker holds it from its claim until its outcome is recorded, and its outcomes.

An attempt ends as :class:`Succeeded`, :class:`Failed` (the handler raised) or :class:`Interrupted`
(the worker shut down first); each carries what its announcement needs: nothing is read again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django_jobretry.exceptions import UndecodableArguments
from django_jobretry.jobs.history import AttemptEnd, AttemptEntry, RenderedError
from django_jobretry.jobs.sql import as_json
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


#: Announces a success once written, given the time the statement wrote (a django.tasks task's end).
type Finish = Callable[[Succeeded, datetime], None]


@dataclass(frozen=True)
class Kept:
    """What a django.tasks task's ``func`` returns (``@job`` values are not kept): the JSON text stored
    as the job's return value, and what the main loop calls once the success is written (picklable: it
    comes back from a child process)."""

    result: str
    finish: Finish


@dataclass(frozen=True)
class Succeeded:
    """The handler returned; ``result`` and ``finish`` are what a :class:`Kept` gave, if anything."""

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
