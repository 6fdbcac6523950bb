"""Testing support for code that enqueues jobs: run them in the test, see what is queued.

Why: a worker claims jobs on its own connection, so inside a
``django.test.TestCase`` (one transaction, never committed) it cannot see the
test's jobs, and ``call_command("runworker", burst=True)`` closes the test's
connection. :func:`run_jobs` runs the due jobs in the calling thread, on the
test's own connection and transaction, through the worker's own claim,
runner and recorder: attempts, retries, dead letters, history and signals
are what a worker leaves behind (docs/testing.md). Every write of job state
goes through ``django_jobretry.services``.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from django.db import connection, transaction

from django_jobretry import signals
from django_jobretry.decorators import JobDefinition
from django_jobretry.display import count_of
from django_jobretry.exceptions import TooManyRuns, UnknownTask
from django_jobretry.jobs import claim, retention
from django_jobretry.jobs.claimed import ClaimedJob, Failed, Succeeded, release
from django_jobretry.jobs.events import send_job_signal
from django_jobretry.jobs.record import Recorder
from django_jobretry.models import Job, JobStatus
from django_jobretry.policy import ErrorKind, RetryPolicy
from django_jobretry.registry import policy_for, registry
from django_jobretry.worker.runner import run_handler, unknown_task

if TYPE_CHECKING:
    from django.tasks import Task

    from django_jobretry.worker.engine import Worker

__all__ = ["MAX_RUNS", "Counts", "Run", "RunSummary", "TooManyRuns", "classify", "enqueued", "run_jobs"]

logger = logging.getLogger("django_jobretry")

#: How many attempts one :func:`run_jobs` call makes before it gives up with
#: :class:`TooManyRuns`: far more than a test needs, few enough to end a job
#: that keeps enqueuing itself within seconds.
MAX_RUNS = 1000
#: The lease of an attempt run by :func:`run_jobs`; only a worker running
#: beside the test (a transactional test) ever looks at it.
LEASE_SECONDS = 300.0

#: "lost": nothing was recorded, because the attempt lost its lease (to a worker beside the test).
type Outcome = Literal["succeeded", "retried", "dead", "lost"]
#: A task named by its registered name, its ``@job``, or its django.tasks ``Task``.
type TaskRef = str | JobDefinition[Any] | Task[Any, Any]


@dataclass(frozen=True)
class Counts:
    """How many attempts ended succeeded, with a retry scheduled, or as a dead letter."""

    succeeded: int = 0
    retried: int = 0
    dead: int = 0

    @property
    def total(self) -> int:
        """Every attempt counted here."""
        return self.succeeded + self.retried + self.dead


@dataclass(frozen=True)
class Run:
    """One attempt :func:`run_jobs` made, in the order it made them."""

    job_id: int
    task_name: str
    attempt: int
    outcome: Outcome


@dataclass(frozen=True)
class RunSummary(Counts):
    """What one :func:`run_jobs` call did.

    Equality compares the totals only, so ``run_jobs() == RunSummary(succeeded=1,
    retried=2)`` reads well; ``by_task`` / :meth:`for_task` and ``runs`` (each
    attempt, in order, "lost" ones too) are there to be asserted on explicitly.
    """

    by_task: Mapping[str, Counts] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    runs: tuple[Run, ...] = field(default=(), compare=False)

    def for_task(self, task: TaskRef) -> Counts:
        """The counts of one task (all zero when it did not run)."""
        return self.by_task.get(task_name_of(task), Counts())

    @classmethod
    def of(cls, runs: list[Run]) -> RunSummary:
        def counts(of: list[Run]) -> Counts:
            tally = Counter(run.outcome for run in of)
            return Counts(tally["succeeded"], tally["retried"], tally["dead"])

        names = dict.fromkeys(run.task_name for run in runs)
        by_task = {name: counts([run for run in runs if run.task_name == name]) for name in names}
        total = counts(runs)
        return cls(total.succeeded, total.retried, total.dead, MappingProxyType(by_task), tuple(runs))


def task_name_of(task: TaskRef) -> str:
    """The stored task name of a str, a ``@job`` JobDefinition or a django.tasks ``Task``."""
    if isinstance(task, str):
        return task
    if isinstance(task, JobDefinition):
        return task.name
    module_path = getattr(task, "module_path", None)  # django.tasks.Task, without importing it
    if isinstance(module_path, str):
        return module_path
    raise TypeError(f"{task!r} is not a task: pass its name, its @job or its django.tasks @task")


def run_jobs(
    *,
    include_scheduled: bool = False,
    queue_name: str | None = None,
    task_name: TaskRef | None = None,
    max_runs: int = MAX_RUNS,
) -> RunSummary:
    """Run the due jobs in this thread, on this connection, and record each outcome as a worker would.

    Without ``include_scheduled`` each due job runs once (jobs enqueued by
    those jobs run too, if due): a failed job's retry stays scheduled. With
    it, jobs scheduled for later run as well, retries included, in the
    order of their ``run_at``, until no job is left to run: one call drives
    every job to success or to its dead letter. ``queue_name`` and
    ``task_name`` limit which jobs run. Raises :class:`TooManyRuns` when
    jobs are still due after ``max_runs`` attempts.
    """
    queues = [queue_name] if queue_name is not None else None
    tasks = [task_name_of(task_name)] if task_name is not None else None
    owner = f"run_jobs:{os.getpid()}"
    recorder = Recorder(owner, _sender())
    runs: list[Run] = []
    last_look = False
    while True:
        skip = set() if include_scheduled else {run.job_id for run in runs}
        claimed = claim.claim(owner, 1, LEASE_SECONDS, queues, task_names=tasks, skip=skip)
        if not claimed:
            if include_scheduled and not last_look:
                # Nothing scheduled later either: one more claim, for a retry that
                # fell due between the claim above and this statement.
                last_look = not retention.bring_forward_next(queues=queues, task_names=tasks)
                continue
            return RunSummary.of(runs)
        last_look = False
        job = claimed[0]
        if len(runs) >= max_runs:
            release(claimed)
            raise TooManyRuns(
                f"run_jobs() stopped after {count_of(max_runs, 'attempt')} and jobs are still due (next: job "
                f"{job.id} of {job.task_name!r}): a job that enqueues or reschedules itself never "
                "ends. Fix the loop, or pass max_runs=... if the test really needs more."
            )
        runs.append(Run(job.id, job.task_name, job.attempt, _run_one(job, recorder)))


def _sender() -> type[Worker]:
    """Signals are sent with the Worker class as sender, exactly as a worker sends them."""
    from django_jobretry.worker.engine import Worker

    return Worker


def _run_one(job: ClaimedJob, recorder: Recorder) -> Outcome:
    if registry.get(job.task_name) is None:
        outcome: Succeeded | Failed = unknown_task(job)
    else:
        send_job_signal(recorder.sender, signals.job_started, job)
        outcome = _call(job)
    if isinstance(outcome, Succeeded):
        recorder.record_successes([outcome])
    else:
        recorder.record_failure(outcome)
    # Read back, not assumed: an attempt whose lease was lost changes nothing.
    status = Job.objects.filter(pk=job.id).values_list("status", flat=True).first()
    ended = "dead" if status is None else _ENDED.get(status, "lost")
    logger.info(
        "run_jobs: job %s attempt %s %s",
        job.id,
        job.attempt,
        ended,
        extra={"job_id": job.id, "task": job.task_name, "attempt": job.attempt, "outcome": ended},
    )
    return ended


#: What the job's row says after its outcome is recorded; no row: it is a dead letter now.
_ENDED: dict[str, Outcome] = {JobStatus.SUCCEEDED: "succeeded", JobStatus.READY: "retried"}


class _Aborted(Exception):
    def __init__(self, outcome: Succeeded | Failed) -> None:
        self.outcome = outcome


def _call(job: ClaimedJob) -> Succeeded | Failed:
    """Run the handler; inside the test's transaction, in a savepoint.

    A worker runs handlers in autocommit, so a database error in a handler
    costs only its own statement. Inside a test's transaction the same error
    would abort the whole transaction; then the handler's writes are rolled
    back to the savepoint so the outcome can still be recorded and the test
    go on. Otherwise the handler's writes are kept, as a worker keeps them.
    """
    if not connection.in_atomic_block:
        return run_handler(job, manage_connections=False)
    try:
        with transaction.atomic():
            outcome = run_handler(job, manage_connections=False)
            if connection.needs_rollback or _in_error():
                raise _Aborted(outcome)
    except _Aborted as aborted:
        return aborted.outcome
    return outcome


def _in_error() -> bool:
    """Whether PostgreSQL refuses every statement until a rollback (a failed statement in a transaction)."""
    raw: Any = connection.connection
    # 3 is INERROR in both psycopg 3 (pq.TransactionStatus) and psycopg2 (extensions).
    return raw is not None and bool(raw.info.transaction_status == 3)


def enqueued(task: TaskRef, **filters: Any) -> list[Job]:
    """The ready jobs of ``task`` (due or scheduled), oldest first, without running them.

    ``filters`` are Job field lookups, e.g. ``args=["k"]`` or ``queue_name="other"``.
    """
    rows = Job.objects.ready().filter(task_name=task_name_of(task), **filters)
    return list(rows.order_by("enqueued_at", "id"))


def classify(task: TaskRef, error: BaseException) -> ErrorKind:
    """How a worker would classify ``error`` raised by ``task``: ``ErrorKind.FATAL`` or ``RETRYABLE``.

    Uses the task's own policy (a ``@job`` given here with ``.using(policy=...)``
    brings that policy). Like the worker, an error the policy cannot classify
    is retryable. ``ErrorKind`` is a str enum: ``== "fatal"`` works too.
    """
    name = task_name_of(task)
    definition = task if isinstance(task, JobDefinition) else registry.get(name)
    if definition is None:
        raise UnknownTask(f"task {name!r} is not registered in this process; import the module defining it")
    policy = definition.policy
    if not isinstance(policy, RetryPolicy):
        policy = policy_for(name, policy)
    try:
        return policy.classify(error).kind
    except Exception:  # the error is user code; the worker retries what cannot be classified
        return ErrorKind.RETRYABLE
