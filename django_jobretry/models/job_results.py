"""A job's result read back by the id its enqueue returned, across requeues (docs/results.md).

A requeue makes a new job (decision 0005) whose first requeue entry names the
first job of its chain (:data:`ORIGIN_JOB_ID`); so, like a django.tasks
result (decision 0006), a result asked for by that id is found on whatever row
holds the chain now: the job, the job a requeue made of it, or its dead letter
(:func:`chain_row`, which contrib/django_tasks/results.py reads its rows with).

The models are looked up by name, and the statuses written as their values:
models/job.py imports this module for ``Job.result()``, and
models/dead_letter.py imports models/job.py.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

from django.apps import apps
from django.db import models
from django.db.models import ExpressionWrapper, Q, QuerySet
from django.db.models.fields.json import KeyTextTransform, KeyTransform

from django_jobretry.exceptions import NoResult, ResultNotReady
from django_jobretry.validation import INT_MAX

#: The id of the first job of a requeue chain, for rows that were requeued
#: (their first requeue entry's ``job_id``); the result id of a django.tasks task.
ORIGIN_JOB_ID = KeyTextTransform("job_id", KeyTransform(0, "requeue_history"))
#: Whether the row stores a result: SQL NULL is none kept, JSON ``null`` a kept ``None``
#: (Python reads both as None).
_KEPT = ExpressionWrapper(Q(return_value__isnull=False), output_field=models.BooleanField())
#: How a job that has not finished is named, by its status.
_UNFINISHED = {"ready": "waiting to run", "running": "running", "waiting": "waiting for its parents"}


class _Read(Protocol):
    """What :func:`job_result` reads of a row: a job annotated with ``jobretry_kept``, or a dead letter."""

    pk: int
    task_name: str
    status: str
    attempts: int
    return_value: Any
    jobretry_kept: bool


def chain_row[J: models.Model, D: models.Model](
    origin: int, jobs: QuerySet[J], dead_letters: QuerySet[D]
) -> J | D | None:
    """The one row holding the chain that started as job ``origin`` now; None: never enqueued, or pruned."""
    chain = Q(requeue_count__gt=0, jobretry_origin=str(origin))
    job = jobs.alias(jobretry_origin=ORIGIN_JOB_ID).filter(Q(id=origin, requeue_count=0) | chain).first()
    if job is not None:
        return job
    dead = dead_letters.alias(jobretry_origin=ORIGIN_JOB_ID)
    return dead.filter(Q(job_id=origin, requeue_count=0) | chain).first()


def first_job_id(job_id: int, requeue_history: Any) -> int:
    """The id of the first job of a row's requeue chain: its own, until it is requeued."""
    first = requeue_history[0] if isinstance(requeue_history, list) and requeue_history else None
    found = first.get("job_id") if isinstance(first, dict) else None
    return found if isinstance(found, int) and not isinstance(found, bool) else job_id


def job_result(job_id: int) -> Any:
    """What the job enqueued as ``job_id`` returned, as stored (JSON): read now, after any requeue.

    :class:`ResultNotReady` while it has not finished; :class:`NoResult` when
    it succeeded without keeping its value, is a dead letter, or is gone.
    """
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise TypeError(f"job_result() takes a job id (an int), not a {type(job_id).__name__}")
    job_model = apps.get_model("django_jobretry", "Job")
    dead_model = apps.get_model("django_jobretry", "DeadLetter")
    found = None
    if 0 < job_id <= INT_MAX:
        found = chain_row(job_id, job_model.objects.annotate(jobretry_kept=_KEPT), dead_model.objects.all())
    if found is None:
        raise NoResult(f"no job {job_id}: never enqueued, or pruned since (its result went with it)")
    row = cast(_Read, found)
    named = f"job {job_id} ({row.task_name})"
    if isinstance(found, dead_model):
        raise NoResult(
            f"{named} is dead letter {row.pk}, so it has no result; a requeue runs it again, and a "
            "success then keeps one"
        )
    if row.status != "succeeded":
        doing = "retrying" if row.status == "ready" and row.attempts else _UNFINISHED.get(row.status)
        raise ResultNotReady(f"{named} has not finished: it is {doing}; ask again once it has succeeded")
    if not row.jobretry_kept:
        raise NoResult(
            f"{named} succeeded without keeping its result: its task keeps none. Declare "
            "@job(keep_result=True), or keep_result on its policy, and the next jobs keep theirs"
        )
    return row.return_value
