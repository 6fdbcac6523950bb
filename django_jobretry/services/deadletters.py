"""The dead-letter service: list, requeue, discard - guarded compare-and-swap.

Every operator surface (admin, `manage.py deadletters`, Python) calls this
module. An action locks the dead-letter row with SELECT ... FOR UPDATE and
acts only if the row still exists: when two operators race, exactly one
wins and the other is told the item was already handled (spec §5).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import DurationField, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Now

from django_jobretry import signals
from django_jobretry.conf import jobretry_settings
from django_jobretry.decorators import INLINE_POLICY
from django_jobretry.exceptions import UnknownPolicy
from django_jobretry.models import DeadLetter, DeadReason, Job
from django_jobretry.policy.errors import JobRetryError
from django_jobretry.services.enqueue import UNIQUE_CONSTRAINT, notify

logger = logging.getLogger("django_jobretry")

_STAMP_LAST_REQUEUE = (
    "jsonb_set(requeue_history, ARRAY[(jsonb_array_length(requeue_history) - 1)::text, 'at'], "
    "to_jsonb(statement_timestamp()))"
)

#: Bulk actions lock and act in chunks so one action never holds thousands of locks.
CHUNK = 500


class NotDead(JobRetryError, LookupError):
    """The dead letter no longer exists: someone requeued or discarded it already."""

    def __init__(self, dead_letter_id: int) -> None:
        self.dead_letter_id = dead_letter_id
        super().__init__(
            f"dead letter {dead_letter_id} is not dead any more: it was already requeued or discarded"
        )


class RequeueConflict(JobRetryError):
    """Requeueing would create a second live job for a unique_key that has one."""

    def __init__(self, dead_letter_id: int, unique_key: str) -> None:
        self.dead_letter_id, self.unique_key = dead_letter_id, unique_key
        super().__init__(
            f"dead letter {dead_letter_id} was not requeued: a live job holds unique_key {unique_key!r}"
        )


@dataclass(frozen=True)
class Page:
    """One page of dead letters, newest first; pass ``next_cursor`` as ``after``."""

    items: list[DeadLetter]
    next_cursor: tuple[datetime, int] | None


@dataclass
class BulkResult:
    """What a bulk action did: acted on, already handled by someone else, refused."""

    done: list[int] = field(default_factory=list)
    already_handled: list[int] = field(default_factory=list)
    conflicts: list[int] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)


def filtered(
    *,
    queue_name: str | None = None,
    task_name: str | None = None,
    reason: str | None = None,
    error_class: str | None = None,
    older_than: timedelta | None = None,
) -> QuerySet[DeadLetter]:
    """Dead letters matching the filters, newest dead first; ages use the database clock."""
    if reason is not None and reason not in DeadReason.values:
        raise ValueError(f"reason {reason!r} is invalid: one of {DeadReason.values}")
    queryset = DeadLetter.objects.order_by("-dead_at", "-id")
    if queue_name is not None:
        queryset = queryset.filter(queue_name=queue_name)
    if task_name is not None:
        queryset = queryset.filter(task_name=task_name)
    if reason is not None:
        queryset = queryset.filter(reason=reason)
    if error_class is not None:
        queryset = queryset.filter(last_error_class=error_class)
    if older_than is not None:
        queryset = queryset.filter(dead_at__lt=Now() - Value(older_than, output_field=DurationField()))
    return queryset


def list_dead(
    *,
    queue_name: str | None = None,
    task_name: str | None = None,
    reason: str | None = None,
    error_class: str | None = None,
    older_than: timedelta | None = None,
    limit: int = 50,
    after: tuple[datetime, int] | None = None,
) -> Page:
    """A page of dead letters, keyset-paginated on (dead_at, id): cheap at any depth."""
    queryset = filtered(
        queue_name=queue_name,
        task_name=task_name,
        reason=reason,
        error_class=error_class,
        older_than=older_than,
    )
    return page_of(queryset, limit=limit, after=after)


def page_of(queryset: QuerySet[DeadLetter], *, limit: int, after: tuple[datetime, int] | None) -> Page:
    """One keyset page of a newest-first queryset (see filtered())."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise ValueError(f"limit {limit!r} is invalid: an integer from 1 to 1000")
    if after is not None:
        dead_at, last_id = after
        queryset = queryset.filter(dead_at__lte=dead_at).exclude(dead_at=dead_at, id__gte=last_id)
    items = list(queryset[: limit + 1])
    more = len(items) > limit
    items = items[:limit]
    return Page(items, (items[-1].dead_at, items[-1].pk) if more else None)


def requeue(dead_letter_id: int, *, run_after: timedelta | None = None, actor: str | None = None) -> Job:
    """Turn a dead letter back into a ready job; raises NotDead if it is gone."""
    with transaction.atomic():
        dead = DeadLetter.objects.select_for_update().filter(pk=dead_letter_id).first()
        if dead is None:
            raise NotDead(dead_letter_id)
        job = _revive(dead, run_after=run_after, actor=actor)
    _after_requeue(dead, job, actor)
    return job


def discard(dead_letter_id: int, *, actor: str | None = None) -> None:
    """Delete a dead letter for good; raises NotDead if it is gone."""
    with transaction.atomic():
        dead = DeadLetter.objects.select_for_update().filter(pk=dead_letter_id).first()
        if dead is None:
            raise NotDead(dead_letter_id)
        # Delete by id: Model.delete() would reset dead.pk, which the log needs.
        DeadLetter.objects.filter(pk=dead.pk).delete()
    _after_discard(dead, actor)


def requeue_many(
    ids: Iterable[int] | QuerySet[DeadLetter], *, run_after: timedelta | None = None, actor: str | None = None
) -> BulkResult:
    """Requeue each still-dead letter; the rest are reported, never silently skipped."""
    result = BulkResult()
    for chunk in _chunks(_ids(ids)):
        revived: list[tuple[DeadLetter, Job]] = []
        with transaction.atomic():
            for dead in _lock(chunk, result):
                try:
                    with transaction.atomic():
                        revived.append((dead, _revive(dead, run_after=run_after, actor=actor)))
                except RequeueConflict:
                    result.conflicts.append(dead.pk)
        for dead, job in revived:
            result.done.append(dead.pk)
            result.jobs.append(job)
            _after_requeue(dead, job, actor)
    return result


def discard_many(ids: Iterable[int] | QuerySet[DeadLetter], *, actor: str | None = None) -> BulkResult:
    """Discard each still-dead letter; the rest are reported as already handled."""
    result = BulkResult()
    for chunk in _chunks(_ids(ids)):
        with transaction.atomic():
            locked = _lock(chunk, result)
            DeadLetter.objects.filter(pk__in=[dead.pk for dead in locked]).delete()
        for dead in locked:
            result.done.append(dead.pk)
            _after_discard(dead, actor)
    return result


def _ids(ids: Iterable[int] | QuerySet[DeadLetter]) -> list[int]:
    if isinstance(ids, QuerySet):
        return list(ids.values_list("pk", flat=True))
    return sorted({int(i) for i in ids})


def _chunks(ids: list[int]) -> Iterable[list[int]]:
    for start in range(0, len(ids), CHUNK):
        yield ids[start : start + CHUNK]


def _lock(ids: list[int], result: BulkResult) -> list[DeadLetter]:
    # Lock in id order: two bulk actions over overlapping sets cannot deadlock.
    locked = list(DeadLetter.objects.select_for_update().filter(pk__in=ids).order_by("pk"))
    found = {dead.pk for dead in locked}
    result.already_handled += [i for i in ids if i not in found]
    return locked


def _revive(dead: DeadLetter, *, run_after: timedelta | None, actor: str | None) -> Job:
    """Insert the new job and delete the dead letter; the caller holds the row lock."""
    entry = {
        "dead_letter_id": dead.pk,
        "job_id": dead.job_id,
        "reason": dead.reason,
        "attempts": dead.attempts,
        "last_error": dead.last_error[:500],
        "dead_at": dead.dead_at.isoformat(),
        "by": actor or "",
    }
    job = Job(
        task_name=dead.task_name,
        queue_name=dead.queue_name,
        policy_name=dead.policy_name,
        priority=dead.priority,
        args=dead.args,
        kwargs=dead.kwargs,
        max_attempts=_max_attempts(dead),
        unique_key=dead.unique_key,
        requeue_count=dead.requeue_count + 1,
        requeue_history=[*dead.requeue_history, entry],
    )
    if run_after is not None:
        job.run_at = Now() + Value(run_after, output_field=DurationField())
    try:
        with transaction.atomic():
            job.save(force_insert=True)
    except IntegrityError as exc:
        if UNIQUE_CONSTRAINT in str(exc) and dead.unique_key:
            raise RequeueConflict(dead.pk, dead.unique_key) from exc
        raise
    # The "requeued at" time is the database's, like every other timestamp.
    Job.objects.filter(pk=job.pk).update(requeue_history=RawSQL(_STAMP_LAST_REQUEUE, []))  # noqa: S611 - constant SQL
    DeadLetter.objects.filter(pk=dead.pk).delete()
    notify([job.queue_name])
    job.refresh_from_db()
    return job


def _max_attempts(dead: DeadLetter) -> int:
    """The current policy's limit: an operator may have raised it before requeueing."""
    if dead.policy_name == INLINE_POLICY:
        from django_jobretry.registry import registry

        definition = registry.get(dead.task_name)
        return definition.resolve_policy()[1].max_attempts if definition else dead.max_attempts
    try:
        return jobretry_settings.policy(dead.policy_name).max_attempts
    except UnknownPolicy:
        return dead.max_attempts


def _send(signal: Any, **kwargs: Any) -> None:
    for receiver, result in signal.send_robust(DeadLetter, **kwargs):
        if isinstance(result, Exception):
            logger.error("signal receiver %r failed", receiver, exc_info=result)


def _after_requeue(dead: DeadLetter, job: Job, actor: str | None) -> None:
    logger.info(
        "dead letter %s requeued as job %s",
        dead.pk,
        job.pk,
        extra={
            "dead_letter_id": dead.pk,
            "job_id": job.pk,
            "task": job.task_name,
            "queue": job.queue_name,
            "attempt": 0,
            "outcome": "requeued",
            "actor": actor or "",
            "requeue_count": job.requeue_count,
        },
    )
    _send(
        signals.job_requeued,
        dead_letter_id=dead.pk,
        job_id=job.pk,
        task_name=job.task_name,
        queue_name=job.queue_name,
        requeue_count=job.requeue_count,
        actor=actor,
    )


def _after_discard(dead: DeadLetter, actor: str | None) -> None:
    logger.info(
        "dead letter %s discarded",
        dead.pk,
        extra={
            "dead_letter_id": dead.pk,
            "job_id": dead.job_id,
            "task": dead.task_name,
            "queue": dead.queue_name,
            "attempt": dead.attempts,
            "outcome": "discarded",
            "actor": actor or "",
        },
    )
    _send(
        signals.dead_letter_discarded,
        dead_letter_id=dead.pk,
        job_id=dead.job_id,
        task_name=dead.task_name,
        queue_name=dead.queue_name,
        actor=actor,
    )
