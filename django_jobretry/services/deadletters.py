"""The dead-letter service: list, requeue, discard - guarded compare-and-swap.

Every operator surface (admin, `manage.py deadletters`, Python) calls this
module. An action locks the dead-letter row with SELECT ... FOR UPDATE and
acts only if the row still exists: when two operators race, exactly one
wins and the other is told the item was already handled
(docs/design.md#dead-letters).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import DurationField, Q, QuerySet, Value
from django.db.models.functions import Now
from django.utils import timezone

from django_jobretry.exceptions import NotDead, RequeueConflict
from django_jobretry.models import CounterEvent, DeadLetter, DeadLetterSource, DeadReason, Job
from django_jobretry.models.instants import check_run_after
from django_jobretry.registry import policy_for
from django_jobretry.services import transitions
from django_jobretry.services.console import counters
from django_jobretry.services.deadletter_events import announce_discard, announced_requeue
from django_jobretry.services.enqueue import UNIQUE_CONSTRAINT, notify
from django_jobretry.services.history import recorded_actor
from django_jobretry.services.resubmitters import Resubmitted, resubmitter_for
from django_jobretry.services.sql import violates

logger = logging.getLogger("django_jobretry")

#: The columns an action reads under its lock: enough to log, signal and
#: revive; arguments and histories are moved by SQL, never loaded here.
LOCKED_FIELDS = (
    "id",
    "job_id",
    "task_name",
    "queue_name",
    "policy_name",
    "reason",
    "attempts",
    "unique_key",
    "source",
)

#: Bulk actions lock and act in chunks so one action never holds thousands of locks.
CHUNK = 500


@dataclass(frozen=True)
class Page:
    """One page of dead letters, newest first; pass ``next_cursor`` as ``after``.

    Iterating a page yields its dead letters, so ``for dead in list_dead()``
    and ``list(list_dead())`` work like on a list; the cursor stays here.
    """

    items: list[DeadLetter]
    next_cursor: tuple[datetime, int] | None

    def __iter__(self) -> Iterator[DeadLetter]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass
class BulkResult:
    """What a bulk action did: acted on, already handled by someone else, refused."""

    done: list[int] = field(default_factory=list)
    already_handled: list[int] = field(default_factory=list)
    conflicts: list[int] = field(default_factory=list)
    #: A Job per done requeue, or a Resubmitted for dead letters from another source.
    jobs: list[Job | Resubmitted] = field(default_factory=list)


def filtered(
    *,
    queue_name: str | None = None,
    task_name: str | None = None,
    reason: str | None = None,
    error_class: str | None = None,
    older_than: timedelta | None = None,
    since: timedelta | datetime | None = None,
) -> QuerySet[DeadLetter]:
    """Dead letters matching the filters, newest dead first; ages use the database clock.

    ``since``: dead at or after this time, or within this long (a timedelta) back from now.
    """
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
        # "PartnerTimeout", as `deadletters list` prints it, matches any module's class of that name.
        by_name = Q(last_error_class__endswith=f".{error_class}") if "." not in error_class else Q()
        queryset = queryset.filter(Q(last_error_class=error_class) | by_name)
    if older_than is not None:
        queryset = queryset.filter(dead_at__lt=Now() - Value(older_than, output_field=DurationField()))
    if isinstance(since, timedelta):
        queryset = queryset.filter(dead_at__gte=Now() - Value(since, output_field=DurationField()))
    elif isinstance(since, datetime):
        if timezone.is_naive(since):
            raise ValueError(f"since {since.isoformat()!r} is invalid: a datetime with a time zone")
        queryset = queryset.filter(dead_at__gte=since)
    elif since is not None:
        raise ValueError(f"since {since!r} is invalid: a datetime or a timedelta")
    return queryset


def list_dead(
    *,
    queue_name: str | None = None,
    task_name: str | None = None,
    reason: str | None = None,
    error_class: str | None = None,
    older_than: timedelta | None = None,
    since: timedelta | datetime | None = None,
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
        since=since,
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


def requeue(
    dead_letter_id: int, *, run_after: timedelta | None = None, actor: str | None = None
) -> Job | Resubmitted:
    """Turn a dead letter back into a ready job; raises NotDead if it is gone.

    A dead letter from another system (``source``, e.g. django-q2) goes back
    to that system instead, and a :class:`Resubmitted` is returned. A
    ``run_after`` no Python process could read back is InvalidJob, before
    any row is locked.
    """
    check_run_after(run_after)
    actor = _recorded(actor)
    with transaction.atomic():
        dead = DeadLetter.objects.select_for_update().only(*LOCKED_FIELDS).filter(pk=dead_letter_id).first()
        if dead is None:
            raise NotDead(dead_letter_id)
        job = _revive(dead, run_after=run_after, actor=actor)
        counters.count(CounterEvent.REQUEUED, [(dead.task_name, dead.queue_name)])
    announced_requeue(dead, job, actor)
    return job


def discard(dead_letter_id: int, *, actor: str | None = None) -> None:
    """Delete a dead letter for good; raises NotDead if it is gone."""
    if discard_many([dead_letter_id], actor=actor).already_handled:
        raise NotDead(dead_letter_id)


def requeue_many(
    ids: Iterable[int] | QuerySet[DeadLetter], *, run_after: timedelta | None = None, actor: str | None = None
) -> BulkResult:
    """Requeue each still-dead letter; the rest are reported, never silently skipped."""
    check_run_after(run_after)
    actor, result = _recorded(actor), BulkResult()
    for chunk in _chunks(_ids(ids)):
        revived: list[tuple[DeadLetter, Job | Resubmitted]] = []
        with transaction.atomic():
            for dead in _lock(chunk, result):
                try:
                    revived.append((dead, _revive(dead, run_after=run_after, actor=actor)))
                except RequeueConflict:
                    result.conflicts.append(dead.pk)
            counters.count(CounterEvent.REQUEUED, [(dead.task_name, dead.queue_name) for dead, _ in revived])
        for dead, job in revived:
            result.done.append(dead.pk)
            result.jobs.append(job)
            announced_requeue(dead, job, actor)
    return result


def discard_many(ids: Iterable[int] | QuerySet[DeadLetter], *, actor: str | None = None) -> BulkResult:
    """Discard each still-dead letter; the rest are reported as already handled."""
    actor, result = _recorded(actor), BulkResult()
    for chunk in _chunks(_ids(ids)):
        with transaction.atomic():
            locked = _lock(chunk, result)
            # Delete by id: Model.delete() would reset dead.pk, which the log needs.
            DeadLetter.objects.filter(pk__in=[dead.pk for dead in locked]).delete()
            counters.count(CounterEvent.DISCARDED, [(dead.task_name, dead.queue_name) for dead in locked])
        for dead in locked:
            result.done.append(dead.pk)
            announce_discard(dead, actor)
    return result


def predicted_conflicts(dead_letters: Iterable[DeadLetter]) -> set[int]:
    """Ids of the dead letters whose requeue the unique-key guard would refuse.

    A live job holds the key, or an earlier dead letter in the same batch
    would take it first: what a dry run reports, without locking anything.
    """
    dead_letters = list(dead_letters)
    keys = {dead.unique_key for dead in dead_letters if dead.unique_key}
    held = set(Job.objects.live().filter(unique_key__in=keys).values_list("unique_key", flat=True))
    conflicts = set()
    for dead in dead_letters:
        if dead.unique_key and dead.unique_key in held:
            conflicts.add(dead.pk)
        elif dead.unique_key:
            held.add(dead.unique_key)
    return conflicts


def _ids(ids: Iterable[int] | QuerySet[DeadLetter]) -> list[int]:
    if isinstance(ids, QuerySet):
        return list(ids.values_list("pk", flat=True))
    return sorted({int(i) for i in ids})


def _chunks(ids: list[int]) -> Iterable[list[int]]:
    for start in range(0, len(ids), CHUNK):
        yield ids[start : start + CHUNK]


def _lock(ids: list[int], result: BulkResult) -> list[DeadLetter]:
    # Lock in id order: two bulk actions over overlapping sets cannot deadlock.
    locked = list(
        DeadLetter.objects.select_for_update().only(*LOCKED_FIELDS).filter(pk__in=ids).order_by("pk")
    )
    found = {dead.pk for dead in locked}
    result.already_handled += [i for i in ids if i not in found]
    return locked


def _recorded(actor: str | None) -> str | None:
    """The actor as recorded (history.recorded_actor): no name may make the action fail."""
    return None if actor is None else recorded_actor(actor)


def _revive(dead: DeadLetter, *, run_after: timedelta | None, actor: str | None) -> Job | Resubmitted:
    """transitions.revive under the caller's row lock, in a savepoint a conflict rolls back.

    max_attempts is the current policy's: an operator may have raised it
    before requeueing. A dead letter of another source goes to its resubmitter
    (``run_after`` does not apply there) and never becomes a Job row.
    """
    if dead.source != DeadLetterSource.JOBRETRY:
        resubmit = resubmitter_for(dead)
        with transaction.atomic():
            return resubmit(dead, actor or "")
    max_attempts = policy_for(dead.task_name, dead.policy_name).max_attempts
    try:
        with transaction.atomic():
            job_id = transitions.revive(
                dead.pk, max_attempts=max_attempts, run_after=run_after, actor=actor or ""
            )
    except IntegrityError as exc:
        if violates(exc, UNIQUE_CONSTRAINT) and dead.unique_key:
            raise RequeueConflict(dead.pk, dead.unique_key) from exc
        raise
    if job_id is None:  # unreachable while the caller holds the lock
        raise NotDead(dead.pk)
    job = Job.objects.get(pk=job_id)
    notify([job.queue_name])
    return job
