"""factory-boy factories for the jobs table and the dead letters.

They write rows directly, bypassing the engine: use them to set up a state
(a backlog, a running job with a lease, a dead letter with a history), never
to test how the engine reaches that state - real workers do that.

Defaults match the test app: the ``tests.jobs_app.jobs.record`` task under the
fast ``three`` policy of tests/settings.py. Every default satisfies the
model's database constraints; the traits keep them satisfied for the other
states::

    JobFactory.create()                        # ready, never attempted
    JobFactory.create(running=True)            # claimed by a (fake) worker, live lease
    JobFactory.create(succeeded=True)          # finished after one attempt
    JobFactory.create(retrying=True)           # failed twice, waits a minute for attempt 3
    DeadLetterFactory.create()                 # died of a fatal error on attempt 1
    DeadLetterFactory.create(exhausted=True)   # failed retryably 3 times out of 3
    StatusSampleFactory.create(minutes_ago=90, retrying=7)   # a worker's sample of 90 minutes ago

Call ``.create()`` / ``.build()`` / ``.create_batch(n)`` rather than the
class itself: they are typed (``-> Job``), while ``JobFactory()`` is typed
by mypy as a factory instance although it returns a saved ``Job``.
"""

# factory-boy's declarations (LazyFunction, Trait, ...) are unannotated.
# mypy: allow-untyped-calls

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.utils import timezone
from factory.declarations import LazyAttribute, LazyFunction, SelfAttribute, Sequence, Trait
from factory.django import DjangoModelFactory

from django_jobretry.models import DeadLetter, DeadReason, Job, JobStatus, StatusSample, WorkerProcess

#: The task every factory row names by default: registered by tests.jobs_app.
DEFAULT_TASK = "tests.jobs_app.jobs.record"
#: The fast, jitter-free policy of tests/settings.py (3 attempts).
DEFAULT_POLICY = "three"
#: The lease owner written on rows a factory pretends a worker touched.
FAKE_WORKER = "factory-host:0:00000000"

#: (error_class, message) of the last failure, by dead-letter reason.
_LAST_FAILURE: dict[str, tuple[str, str]] = {
    DeadReason.FATAL: ("django_jobretry.exceptions.FatalError", "payload for k is invalid"),
    DeadReason.EXHAUSTED: ("builtins.ConnectionResetError", "upstream reset for k"),
    DeadReason.DEADLINE: ("builtins.ConnectionResetError", "upstream reset for k"),
    DeadReason.LEASE_EXPIRED: ("", f"lease expired: worker {FAKE_WORKER} stopped heartbeating"),
}

#: How the last attempt ended, by dead-letter reason (default "error").
_LAST_ENDED: dict[str, str] = {DeadReason.FATAL: "fatal", DeadReason.LEASE_EXPIRED: "lease_expired"}


def _traceback(error_class: str, message: str) -> str:
    if not error_class:
        return ""
    return f'Traceback (most recent call last):\n  File "jobs.py", line 1, in job\n{error_class}: {message}\n'


def history_entry(attempt: int, reason: str, *, last: bool) -> dict[str, Any]:
    """One attempt-history entry shaped like the worker's (jobs.history), ``at`` included.

    Attempts before the last failed retryably (and carry the retry ``delay``
    the worker stores); the last one ended the way ``reason`` says.
    """
    if last:
        error_class, message = _LAST_FAILURE[reason]
        kind = "fatal" if reason == DeadReason.FATAL else "retryable"
        ended = _LAST_ENDED.get(reason, "error")
    else:
        error_class, message = _LAST_FAILURE[DeadReason.EXHAUSTED]
        kind, ended = "retryable", "error"
    entry: dict[str, Any] = {
        "attempt": attempt,
        "error_class": error_class,
        "message": message,
        "traceback": _traceback(error_class, message),
        "kind": kind,
        "ended": ended,
        "worker": FAKE_WORKER,
        "at": timezone.now().isoformat(),
    }
    if not last:
        entry["delay"] = 0.01
    return entry


def error_history(attempts: int, reason: str) -> list[dict[str, Any]]:
    """A complete history for a job that died of ``reason`` after ``attempts`` attempts."""
    return [history_entry(a, reason, last=a == attempts) for a in range(1, attempts + 1)]


class JobFactory(DjangoModelFactory[Job]):
    """A live job row; ready and never attempted unless a trait says otherwise."""

    class Meta:
        model = Job

    class Params:
        #: Claimed by a worker that is (pretending to be) alive: attempt 1, lease 30 s ahead.
        running = Trait(
            status=JobStatus.RUNNING,
            attempts=1,
            lease_owner=FAKE_WORKER,
            lease_token=LazyFunction(uuid.uuid4),
            lease_expires_at=LazyFunction(lambda: timezone.now() + timedelta(seconds=30)),
            started_at=LazyFunction(timezone.now),
            first_attempt_at=SelfAttribute("started_at"),
        )
        #: Failed retryably on attempts 1 and 2 and waits for attempt 3, a minute from now:
        #: ready, with attempts made (Job.objects.retrying()).
        retrying = Trait(
            attempts=2,
            errors=LazyFunction(lambda: error_history(2, DeadReason.EXHAUSTED)),
            run_at=LazyFunction(lambda: timezone.now() + timedelta(minutes=1)),
            first_attempt_at=LazyFunction(lambda: timezone.now() - timedelta(seconds=30)),
        )
        #: Succeeded on its first attempt.
        succeeded = Trait(
            status=JobStatus.SUCCEEDED,
            attempts=1,
            started_at=LazyFunction(timezone.now),
            first_attempt_at=SelfAttribute("started_at"),
            finished_at=LazyFunction(timezone.now),
            lease_owner=FAKE_WORKER,
        )

    task_name = DEFAULT_TASK
    queue_name = "default"
    policy_name = DEFAULT_POLICY
    status = JobStatus.READY
    args = LazyFunction(lambda: ["k"])
    kwargs = LazyFunction(dict)
    priority = 0
    attempts = 0
    max_attempts = 3
    # run_at and enqueued_at are left to the database default, now().


class DeadLetterFactory(DjangoModelFactory[DeadLetter]):
    """A dead letter with a history consistent with its reason and attempt count.

    By default it died of a fatal error on its first attempt, so ``errors``
    holds one entry and ``last_error``/``last_error_class`` repeat it. Pass
    ``reason`` and ``attempts`` (or use the ``exhausted`` trait) for another
    story; the history follows unless ``errors`` is given explicitly.
    """

    class Meta:
        model = DeadLetter

    class Params:
        #: Failed retryably on every one of its three attempts.
        exhausted = Trait(reason=DeadReason.EXHAUSTED, attempts=3)

    job_id = Sequence(lambda n: 1_000_000 + n)
    task_name = DEFAULT_TASK
    queue_name = "default"
    policy_name = DEFAULT_POLICY
    priority = 0
    args = LazyFunction(lambda: ["k"])
    kwargs = LazyFunction(dict)
    reason = DeadReason.FATAL
    attempts = 1
    max_attempts = 3
    errors = LazyAttribute(lambda o: error_history(o.attempts, o.reason))
    last_error_class = LazyAttribute(lambda o: o.errors[-1]["error_class"] if o.errors else "")
    last_error = LazyAttribute(lambda o: o.errors[-1]["message"] if o.errors else "")
    enqueued_at = LazyFunction(lambda: timezone.now() - timedelta(minutes=5))
    first_attempt_at = LazyAttribute(lambda o: o.enqueued_at + timedelta(seconds=1))
    # dead_at is left to the database default, now().


class WorkerProcessFactory(DjangoModelFactory[WorkerProcess]):
    """A row of the workers table, as a live worker's heartbeat leaves it.

    ``WorkerProcessFactory.create(lost=True)`` is a worker that stopped
    heartbeating two leases ago (the times are the test process's clock,
    which the tests' database shares).
    """

    class Meta:
        model = WorkerProcess

    class Params:
        lost = Trait(last_heartbeat_at=LazyAttribute(lambda o: timezone.now() - 2 * o.lease))

    host = "factory-host"
    pid = Sequence(lambda n: 1000 + n)
    worker_id = LazyAttribute(lambda o: f"{o.host}:{o.pid}:0000abcd")
    queues = LazyFunction(list)
    concurrency = 4
    pool = "thread"
    version = "0.1.0"
    lease = timedelta(seconds=60)
    running_jobs = 0
    # started_at and last_heartbeat_at are left to the database default, now().


class StatusSampleFactory(DjangoModelFactory[StatusSample]):
    """A status sample as a worker's heartbeat takes it: ``minutes_ago`` whole minutes before now.

    Counts default to zero; pass ``count_limit`` + 1 for "more than the limit".
    """

    class Meta:
        model = StatusSample

    class Params:
        minutes_ago = 0

    taken_at = LazyAttribute(
        lambda o: timezone.now().replace(second=0, microsecond=0) - timedelta(minutes=o.minutes_ago)
    )
    count_limit = 10_000
    ready = 0
    retrying = 0
    running = 0
    dead = 0


from django_jobretry.models import Schedule  # noqa: E402 - appended with its factory


class ScheduleFactory(DjangoModelFactory[Schedule]):
    """A schedule row as a worker's declaration leaves it: every 5 minutes, next slot in 5 minutes.

    For a row no deploy declares any more (left from an older one), name it
    something ``JOBRETRY["SCHEDULES"]`` and the ``@job`` schedules do not hold.
    """

    class Meta:
        model = Schedule

    name = Sequence(lambda n: f"schedule-{n}")
    task_name = DEFAULT_TASK
    cadence = "every 300s"
    next_slot = LazyFunction(lambda: timezone.now() + timedelta(minutes=5))
    declared_at = LazyFunction(timezone.now)
