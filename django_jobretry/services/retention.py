"""Retention: finished jobs do not pile up forever."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import timedelta

from django.db import transaction
from django.db.models import Count, DurationField, Value
from django.db.models.functions import Now

from django_jobretry import signals
from django_jobretry.models import DeadLetter, Job, JobStatus

logger = logging.getLogger("django_jobretry")


def prune_succeeded(older_than: timedelta, *, dry_run: bool = False) -> int:
    """Delete succeeded jobs finished before now() - older_than (database clock)."""
    cutoff = Now() - Value(older_than, output_field=DurationField())
    old = Job.objects.filter(status=JobStatus.SUCCEEDED, finished_at__lt=cutoff)
    if dry_run:
        return old.count()
    count, _ = old.delete()
    logger.info("pruned %d succeeded jobs", count, extra={"outcome": "pruned", "count": count})
    return count


def prune_dead_letters(older_than: timedelta, *, dry_run: bool = False) -> Counter[tuple[str, str]]:
    """Delete dead letters dead longer than ``older_than``; never silently.

    Before deleting, the counts per (queue, reason) are logged and sent as
    the ``dead_letters_pruning`` signal, so an operator can see (and alert
    on) what retention is about to remove. There is no count cap: only age.
    """
    cutoff = Now() - Value(older_than, output_field=DurationField())
    with transaction.atomic():
        # Lock first: a dead letter an operator is requeueing right now is
        # waited for, and then is gone rather than pruned twice.
        ids = list(
            DeadLetter.objects.select_for_update().filter(dead_at__lt=cutoff).values_list("pk", flat=True)
        )
        grouped = DeadLetter.objects.filter(pk__in=ids).values("queue_name", "reason").annotate(n=Count("id"))
        counts: Counter[tuple[str, str]] = Counter(
            {(row["queue_name"], row["reason"]): row["n"] for row in grouped.order_by()}
        )
        if dry_run or not counts:
            return counts
        logger.warning(
            "pruning %d dead letters older than %s",
            sum(counts.values()),
            older_than,
            extra={
                "outcome": "dead_letters_pruning",
                "counts": {f"{q}/{r}": n for (q, r), n in counts.items()},
            },
        )
        signals.send(
            signals.dead_letters_pruning,
            DeadLetter,
            {"outcome": "dead_letters_pruning"},
            counts=dict(counts),
            older_than=older_than,
        )
        DeadLetter.objects.filter(pk__in=ids).delete()
    return counts
