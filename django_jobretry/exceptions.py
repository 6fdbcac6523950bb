"""Every django-jobretry exception, in one place, all under :class:`JobRetryError`.

The four the pure policy needs (``JobRetryError``, ``InvalidPolicy``,
``FatalError``, ``RetryableError``) are defined in ``django_jobretry.policy``,
which may not import Django, and re-exported here; the rest belong to the
Django layer. Catch ``JobRetryError`` to catch any of them.
"""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import ImproperlyConfigured

from django_jobretry.display import did_you_mean
from django_jobretry.policy.errors import (
    CircuitOpen,
    FatalError,
    InvalidPolicy,
    JobRetryError,
    RetryableError,
    Snooze,
)

__all__ = [
    "AttemptLost",
    "CannotResubmit",
    "ChildFailed",
    "ChildStartError",
    "CircuitOpen",
    "DuplicateTaskName",
    "FatalError",
    "InvalidArguments",
    "InvalidFlow",
    "InvalidJob",
    "InvalidPolicy",
    "InvalidProgress",
    "InvalidSettings",
    "JobConflict",
    "JobRetryError",
    "JobTimeout",
    "NoResult",
    "NotDead",
    "RequeueConflict",
    "ResultNotReady",
    "RetryableError",
    "Snooze",
    "StaleArguments",
    "StoredError",
    "TooManyRuns",
    "UndecodableArguments",
    "UnknownPolicy",
    "UnknownTask",
    "UnstorableResult",
    "UnsupportedArgument",
]


class InvalidSettings(JobRetryError, ImproperlyConfigured):
    """settings.JOBRETRY is malformed; the message names the key and what is allowed."""


class DuplicateTaskName(JobRetryError, ImproperlyConfigured):
    """Two different functions were registered under one task name."""


class UnknownPolicy(JobRetryError, LookupError):
    """A policy name was asked for that JOBRETRY["POLICIES"] does not define."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(
            f"unknown retry policy {name!r}; JOBRETRY['POLICIES'] defines {sorted(known)}."
            f"{did_you_mean([name], known)}"
        )


class InvalidJob(JobRetryError, ValueError):
    """An enqueue was refused; the message names the field and what is allowed."""


class InvalidArguments(InvalidJob, TypeError):
    """An enqueue's arguments were refused: a value that is not JSON, or a call the function cannot take.

    Also a ``TypeError``: what Python raises for a call that does not fit
    the signature, and what Django's task framework raises for an argument
    it cannot turn into JSON, so ``except TypeError`` around
    ``Task.enqueue()`` works as with Django's own backends.
    """


class UnsupportedArgument(InvalidArguments):
    """An argument value is of a type JSON has no form for (a datetime, a set, a model instance).

    ``value_type`` is that type. Through django.tasks' ``enqueue()`` the
    message starts with Django's own wording, ``Unsupported type: <class
    '...'>``, as its backends say it, and goes on with ours.
    """

    def __init__(self, message: str, value_type: type) -> None:
        self.value_type = value_type
        super().__init__(message)

    def in_djangos_words(self) -> UnsupportedArgument:
        """The same refusal, its message led by what Django's ``normalize_json`` says of the type."""
        return UnsupportedArgument(f"Unsupported type: {self.value_type}: {self}", self.value_type)


class InvalidFlow(InvalidJob):
    """A workflow was refused as declared or enqueued; the message names the step and what is allowed."""


class InvalidProgress(JobRetryError, ValueError):
    """A ``progress()`` call was refused; the message names the field, its value and what is allowed."""


class JobConflict(JobRetryError):
    """An enqueue with ``on_conflict="raise"`` found its unique key taken; ``job_id`` holds it."""

    def __init__(self, unique_key: str, job_id: int, status: str) -> None:
        self.unique_key, self.job_id, self.status = unique_key, job_id, status
        super().__init__(
            f"unique_key {unique_key!r} is held by job {job_id} ({status}): nothing was enqueued"
        )


class StaleArguments(FatalError, TypeError):
    """A job's stored arguments no longer fit its function's signature, which changed since the enqueue.

    Fatal: every attempt would fail the same way. The worker checks the
    arguments before the call, so a ``TypeError`` raised inside the
    function is not this, and its policy classifies it.
    """


class StoredError(JobRetryError):
    """A failed attempt's exception as its history recorded it: the class path and the traceback text.

    Raised and caught around django.tasks' ``task_finished`` for a failed
    task, so that Django's log line of it carries the traceback, as with
    Django's own backends, although the exception itself is gone.
    """


class UnknownTask(JobRetryError, LookupError):
    """The job's task name is not registered in this worker (yet): a retryable failure."""


class JobTimeout(JobRetryError, TimeoutError):
    """A handler ran past its time limit (``timeout`` on @job or its policy): a retryable failure."""


class UndecodableArguments(JobRetryError, ValueError):
    """A claimed job's stored arguments cannot be turned back into a call: a retryable failure."""


class UnstorableResult(FatalError, TypeError):
    """A value that must be kept cannot be stored as JSON within MAX_ARGS_BYTES and MAX_ARGS_DEPTH.

    What a django.tasks task returns, an ``@job(keep_result=True)``'s value,
    and a workflow step's that a child reads (``results=True``). Fatal:
    running the task again returns the same kind of value. The attempt
    fails with this error instead of the result being lost.
    """


class NoResult(JobRetryError, LookupError):
    """``job.result()`` has no value to give: the job kept none, died, or is gone.

    Waiting does not change that (see :class:`ResultNotReady`, a subclass,
    for a job that has not finished yet); the message says which case it is.
    """


class ResultNotReady(NoResult):
    """``job.result()`` of a job that has not finished yet (ready, running, retrying, waiting): ask later."""


class ChildFailed(JobRetryError):
    """Stands for an exception raised in a process-pool child, or for the child's death.

    Only the exception's text and kind come back from the child, not the
    object; a child that exits mid-job is recorded as this (``worker_exit``).
    """


class ChildStartError(JobRetryError):
    """A process-pool child could not be started or set up: the attempt fails, retryably."""


class AttemptLost(JobRetryError):
    """Names the failure of an attempt that raised nothing: its worker stopped or was told to.

    A lease that expired, a shutdown or a cancel leaves a history entry with
    no exception class; a django.tasks ``TaskError`` reports it as this.
    """


class TooManyRuns(JobRetryError, RuntimeError):
    """``testing.run_jobs()`` made its maximum number of attempts and jobs were still due: probably a loop."""


class NotDead(JobRetryError, LookupError):
    """The dead letter no longer exists: someone requeued or discarded it already."""

    def __init__(self, dead_letter_id: int) -> None:
        self.dead_letter_id = dead_letter_id
        super().__init__(
            f"dead letter {dead_letter_id} is not dead any more: it was already requeued or discarded"
        )


class RequeueConflict(JobRetryError):
    """Requeueing would give a unique_key a second holder: a live job, or one that succeeded lately.

    ``until``: the key is held by a job that succeeded, until then (its ``unique_for``).
    ``why`` says it in the words the admin and the command line show.
    """

    def __init__(self, dead_letter_id: int, unique_key: str, until: datetime | None = None) -> None:
        self.dead_letter_id, self.unique_key, self.until = dead_letter_id, unique_key, until
        if until is None:
            self.why = f"a live job holds unique key {unique_key!r}"
            held = f"a live job holds unique_key {unique_key!r}"
        else:
            self.why = held = (
                f"unique key {unique_key!r} is taken until {until:%Y-%m-%d %H:%M:%S %Z} (unique_for)"
            )
        super().__init__(f"dead letter {dead_letter_id} was not requeued: {held}")


class CannotResubmit(RequeueConflict):
    """A dead letter from another system (django-q2) cannot be handed back to it."""

    def __init__(self, dead_letter_id: int, why: str) -> None:
        self.dead_letter_id, self.unique_key, self.why, self.until = dead_letter_id, "", why, None
        JobRetryError.__init__(self, f"dead letter {dead_letter_id} was not requeued: {why}")
