"""django.tasks results read from our rows: a job or a dead letter seen as a ``TaskResult``.

A result id is the id of the first job of its requeue chain, so a caller
polling one id sees FAILED -> READY -> SUCCESSFUL across a requeue
(docs/decisions/0006-a-task-result-spans-requeues.md). Only imported by
:mod:`django_jobretry.contrib.django_tasks.backend`, which makes sure ``django.tasks`` exists.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from django.tasks.base import Task, TaskError, TaskResultStatus
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.utils.dateparse import parse_datetime

from django_jobretry.contrib.django_tasks.task_class import JobRetryTask, JobRetryTaskResult
from django_jobretry.exceptions import InvalidJob
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.models.job_results import chain_row
from django_jobretry.validation import INT_MAX

#: The error class a history entry without one (lease expired, shutdown, cancel) is reported as.
LOST_ATTEMPT_CLASS = "django_jobretry.exceptions.AttemptLost"

_STATUS = {
    JobStatus.READY: TaskResultStatus.READY,
    JobStatus.RUNNING: TaskResultStatus.RUNNING,
    JobStatus.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
}


def parse_result_id(result_id: object) -> int:
    """The first job id a result id names; anything else is a result that does not exist.

    Only the spelling this backend hands out (``str(job id)``) names a result:
    "012" is not "12", or a result read by it would carry another id.
    """
    text = str(result_id)
    canonical = text.isascii() and text.isdigit() and 0 < len(text) <= 19 and text[0] != "0"
    if not canonical or int(text) > INT_MAX:
        raise TaskResultDoesNotExist(f"{result_id!r} is not a task result id of this backend")
    return int(text)


def find_row(result_id: object) -> Job | DeadLetter:
    """The one row holding this result now: the live or finished job, or its dead letter.

    Found as ``job.result()`` finds a job's (models/job_results.py).
    """
    found = chain_row(parse_result_id(result_id), Job.objects.all(), DeadLetter.objects.all())
    if found is None:
        raise TaskResultDoesNotExist(f"no task result {result_id!r}: never enqueued, or pruned since")
    return found


def enqueued_task(row: Job | DeadLetter, registered: Task[..., Any]) -> Task[..., Any]:
    """The registered ``@task`` as the row was enqueued: its ``.using()`` priority, queue, run_after and key.

    All are on every row, dead letters too; ``run_after`` is the time the
    enqueue gave, which retries, holds and requeues leave alone (they move
    ``run_at``). A task whose queue left ``QUEUES`` since is reported as
    registered.
    """
    changes: dict[str, Any] = {
        "priority": row.priority,
        "queue_name": row.queue_name,
        "run_after": row.run_after,
    }
    if (unique_key := _using_key(row, registered)) is not None:
        changes["unique_key"] = unique_key
    if all(getattr(registered, name) == value for name, value in changes.items()):
        return registered
    try:
        return dataclasses.replace(registered, **changes)
    except InvalidTask:
        return registered


def _using_key(row: Job | DeadLetter, registered: Task[..., Any]) -> str | None:
    """The key a ``.using(unique_key=...)`` gave the row's enqueue; None for the task's own key, or none.

    A key the task's ``unique_args`` make of the row's arguments is the task's own.
    """
    key = row.unique_key
    if not isinstance(registered, JobRetryTask) or key is None or key == registered.unique_key:
        return None
    unique = registered.unique
    if unique.key is None and unique.args and isinstance(row.args, list) and isinstance(row.kwargs, dict):
        try:
            own = unique.key_for(
                registered.module_path,
                registered.func,
                tuple(row.args),
                row.kwargs,
                takes_context=registered.takes_context,
            )
        except (InvalidJob, TypeError):  # arguments the function no longer takes: not its key
            own = None
        if own == key:
            return None
    return key


def result_of(
    row: Job | DeadLetter, task: Task[..., Any], backend: str, *, deduplicated: bool = False
) -> JobRetryTaskResult:
    """The row as a TaskResult of ``task``, as the backend called ``backend`` reports it."""
    history = _entries(row.errors)
    if isinstance(row, DeadLetter):
        status, origin = TaskResultStatus.FAILED, row.job_id
        finished_at: datetime | None = row.dead_at
        last_attempted_at: datetime | None = _last_at(history) or row.dead_at
        current: list[str] = []
    else:
        status, origin = _STATUS[JobStatus(row.status)], row.pk
        finished_at = row.finished_at if row.status == JobStatus.SUCCEEDED else None
        last_attempted_at = row.started_at
        current = [row.lease_owner] if row.status != JobStatus.READY else []
    requeues = _entries(row.requeue_history)
    enqueued_at, started_at = row.enqueued_at, row.first_attempt_at
    if requeues:
        # The result began with the first job of the chain: its id, enqueue and first attempt.
        first = requeues[0]
        if str(first.get("job_id", "")).isdigit():
            origin = int(first["job_id"])
        enqueued_at = _time(first.get("enqueued_at")) or enqueued_at
        started_at = _time(first.get("first_attempt_at")) or started_at
    result = JobRetryTaskResult(
        task=task,
        id=str(origin),
        status=status,
        enqueued_at=enqueued_at,
        started_at=started_at,
        finished_at=finished_at,
        last_attempted_at=last_attempted_at,
        # The table makes them an array and an object; one nested past Python's recursion
        # limit loads as its text (models/fields.py), which a TaskResult cannot carry.
        args=row.args if isinstance(row.args, list) else [],
        kwargs=row.kwargs if isinstance(row.kwargs, dict) else {},
        backend=backend,
        errors=[_task_error(entry) for entry in history],
        worker_ids=_worker_ids(row, history, current, requeues),
        deduplicated=deduplicated,
    )
    if status == TaskResultStatus.SUCCESSFUL and isinstance(row, Job):
        object.__setattr__(result, "_return_value", row.return_value)
    return result


def _entries(value: list[Any] | str) -> list[dict[str, Any]]:
    """The well-formed entries of a history: the table makes it an array, but its entries may be anything.

    One nested past Python's recursion limit loads as its text (models/fields.py): no entries.
    """
    return [entry for entry in value if isinstance(entry, dict)]


def _task_error(entry: dict[str, Any]) -> TaskError:
    error_class = str(entry.get("error_class") or LOST_ATTEMPT_CLASS)
    traceback = str(entry.get("traceback") or f"{entry.get('ended')}: {entry.get('message', '')}")
    return TaskError(exception_class_path=error_class, traceback=traceback)


def _worker_ids(
    row: Job | DeadLetter, history: list[dict[str, Any]], current: list[str], requeues: list[dict[str, Any]]
) -> list[str]:
    """One worker id per attempt, the requeued ones included; "" where the bounded history lost it.

    Only entries with a worker were attempts: an operator's cancel of a
    waiting task records why it ended, but nothing ran.
    """
    known = [str(entry["worker"]) for entry in history if entry.get("worker")] + current
    earlier = sum(entry["attempts"] for entry in requeues if isinstance(entry.get("attempts"), int))
    attempts = row.attempts + earlier
    return [""] * (attempts - len(known)) + known[-attempts:] if attempts else []


def _last_at(history: list[dict[str, Any]]) -> datetime | None:
    return _time(history[-1].get("at")) if history else None


def _time(value: Any) -> datetime | None:
    """A time from a history entry; None when missing or not a time (a hand-edited row)."""
    try:
        return parse_datetime(value) if isinstance(value, str) else None
    except ValueError:  # well-formed but impossible, e.g. month 13
        return None
