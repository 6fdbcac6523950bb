"""The dead-letter service: list, requeue, discard - guarded compare-and-swap.

Every operator surface (admin, `manage.py deadletters`, Python) calls this
module. An action locks the dead-letter row with SELECT ... FOR UPDATE and
acts only if the row still exists: when two operators race, exactly one
wins and the other is told the item was already handled
(docs/design.md#dead-letters).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import cast

from django.db.models import DurationField, Max, Q, QuerySet, Value
from django.db.models.functions import Now
from django.utils import timezone

from django_jobretry.deadletters import chunks
from django_jobretry.deadletters.chunks import (
    CHUNK,
    Locked,
    Outcome,
    Requeued,
    announce_discards,
    announce_requeues,
)
from django_jobretry.deadletters.external import Resubmitted
from django_jobretry.exceptions import NotDead, RequeueConflict
from django_jobretry.jobs.history import recorded_actor
from django_jobretry.models import DeadLetter, DeadReason, Job, JobStatus
from django_jobretry.models.fingerprints import check_fingerprint
from django_jobretry.models.instants import check_run_after

__all__ = [
    "CHUNK",
    "BulkResult",
    "Page",
    "discard",
    "discard_many",
    "filtered",
    "list_dead",
    "page_of",
    "predicted_conflicts",
    "requeue",
    "requeue_many",
]


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
    #: Why each of ``conflicts`` was refused, in the same order: RequeueConflict names the held
    #: unique_key; CannotResubmit says why another source would not take it back.
    refusals: list[RequeueConflict] = field(default_factory=list)
    #: What each done requeue became, in the order of ``done``: read through ``jobs``.
    made: list[Requeued] = field(default_factory=list, repr=False)

    @cached_property
    def jobs(self) -> list[Job | Resubmitted]:
        """The new Job of each done requeue, in the order of ``done`` (requeue only), as the requeue made it.

        id, task_name, queue_name, requeue_count and status are loaded, no
        query is made, and any other field loads on access. A dead letter of
        another source gives a Resubmitted instead. Built on first use: a
        caller that only counts does not pay for 100,000 model instances.
        """
        return [_became(row) for row in self.made]

    def add(self, outcome: Outcome) -> None:
        """Append one chunk's outcome."""
        self.done += [row.id for row in outcome.done]
        self.already_handled += outcome.already_handled
        self.conflicts += [refused.dead_letter_id for refused in outcome.refusals]
        self.refusals += outcome.refusals
        self.made += [row for row in outcome.done if isinstance(row, Requeued)]
        self.__dict__.pop("jobs", None)

    def extend(self, other: BulkResult) -> None:
        """Append another call's result (a paced command's batches)."""
        for name in ("done", "already_handled", "conflicts", "refusals", "made"):
            getattr(self, name).extend(getattr(other, name))
        self.__dict__.pop("jobs", None)


def filtered(
    *,
    queue_name: str | None = None,
    task_name: str | None = None,
    reason: str | None = None,
    error_class: str | None = None,
    older_than: timedelta | None = None,
    since: timedelta | datetime | None = None,
    fingerprint: str | None = None,
) -> QuerySet[DeadLetter]:
    """Dead letters matching the filters, newest dead first; ages use the database clock.

    ``since``: dead at or after this time, or within this long (a timedelta) back from now.
    ``fingerprint``: one failure group's (deadletters/search.py).
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
    if fingerprint is not None:
        queryset = queryset.filter(fingerprint=check_fingerprint(fingerprint))
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
    fingerprint: str | None = None,
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
        fingerprint=fingerprint,
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
    """Turn a dead letter back into a ready job; NotDead if it is gone, RequeueConflict if its key is held.

    A dead letter from another system (``source``, e.g. django-q2) goes back
    to that system instead, and a :class:`Resubmitted` is returned. A
    ``run_after`` no Python process could read back is InvalidJob, before
    any row is locked.
    """
    result = requeue_many([dead_letter_id], run_after=run_after, actor=actor)
    if result.already_handled:
        raise NotDead(dead_letter_id)
    if result.refusals:
        raise result.refusals[0]
    became = result.jobs[0]
    return became if isinstance(became, Resubmitted) else Job.objects.get(pk=became.pk)


def discard(dead_letter_id: int, *, actor: str | None = None) -> None:
    """Delete a dead letter for good; raises NotDead if it is gone."""
    if discard_many([dead_letter_id], actor=actor).already_handled:
        raise NotDead(dead_letter_id)


def requeue_many(
    ids: Iterable[int] | QuerySet[DeadLetter], *, run_after: timedelta | None = None, actor: str | None = None
) -> BulkResult:
    """Requeue each still-dead letter, a chunk per transaction; the rest are reported, never skipped.

    A few statements per chunk of up to ``CHUNK`` dead letters, whatever its
    size (deadletters/chunks.py).
    """
    check_run_after(run_after)
    actor, result = _recorded(actor), BulkResult()
    for chunk in chunks.chunks(_ids(ids)):
        outcome = chunks.requeue(chunk, run_after=run_after, actor=actor or "")
        result.add(outcome)
        announce_requeues(cast("list[Requeued]", outcome.done), actor)
    return result


def discard_many(ids: Iterable[int] | QuerySet[DeadLetter], *, actor: str | None = None) -> BulkResult:
    """Discard each still-dead letter, a chunk per transaction; the rest are reported as already handled."""
    actor, result = _recorded(actor), BulkResult()
    for chunk in chunks.chunks(_ids(ids)):
        outcome = chunks.discard(chunk)
        result.add(outcome)
        announce_discards(cast("list[Locked]", outcome.done), actor)
    return result


def predicted_conflicts(dead_letters: Iterable[DeadLetter]) -> set[int]:
    """Ids of the dead letters whose requeue the unique-key guard would refuse.

    A job holds the key (a live one, or one that succeeded within its
    ``unique_for``), or an earlier dead letter in the same batch
    would take it first: what a dry run reports, without locking anything.
    """
    dead_letters = list(dead_letters)
    keys = {dead.unique_key for dead in dead_letters if dead.unique_key}
    held = set(Job.objects.live().filter(unique_key__in=keys).values_list("unique_key", flat=True))
    ended = _last_successes({dead.unique_key for dead in dead_letters if dead.unique_key and dead.unique_for})
    conflicts = set()
    for dead in dead_letters:
        if not dead.unique_key:
            continue
        recent = ended.get(dead.unique_key)
        if dead.unique_key in held or (
            recent and dead.unique_for and recent[0] > recent[1] - dead.unique_for
        ):
            conflicts.add(dead.pk)
        else:
            held.add(dead.unique_key)
    return conflicts


def _last_successes(keys: set[str]) -> dict[str, tuple[datetime, datetime]]:
    """Per key, when its latest succeeded job ended, and the database's now (for a unique_for window)."""
    if not keys:
        return {}
    rows = (
        Job.objects.filter(status=JobStatus.SUCCEEDED, unique_key__in=keys)
        .values("unique_key")
        .annotate(last=Max("finished_at"), now=Now())
        .values_list("unique_key", "last", "now")
    )
    return {key: (last, now) for key, last, now in rows if key is not None}


def _ids(ids: Iterable[int] | QuerySet[DeadLetter]) -> list[int]:
    if isinstance(ids, QuerySet):
        return list(ids.values_list("pk", flat=True))
    return sorted({int(i) for i in ids})


def _recorded(actor: str | None) -> str | None:
    """The actor as recorded (history.recorded_actor): no name may make the action fail."""
    return None if actor is None else recorded_actor(actor)


READY = JobStatus.READY.value


def _became(row: Requeued) -> Job | Resubmitted:
    """What a requeued dead letter became, from the revive statement's row: no query."""
    if row.became == "job":
        known = {"id": row.job_id, "task_name": row.task_name, "queue_name": row.queue_name}
        known |= {"requeue_count": row.requeue_count, "status": READY}
        # from_db takes the loaded values in the model's field order; the rest stay deferred.
        names = [f.attname for f in Job._meta.concrete_fields if f.attname in known]
        return Job.from_db(None, names, [known[name] for name in names])
    return Resubmitted(str(row.job_id), row.task_name, row.queue_name, row.requeue_count, row.became)
