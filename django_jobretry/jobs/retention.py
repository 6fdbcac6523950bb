"""Retention: finished jobs and (opt-in) old dead letters do not pile up forever.

Both prune in bounded batches, each its own short transaction that locks
only its rows (with SKIP LOCKED, so a dead letter being requeued right now
is left to the requeue): a million old rows never become one long lock or
one huge delete.

A workflow's succeeded jobs stay while their flow runs: a step still to
run reads its parents' results from them (flows/results.py), and the flow's
page shows them. So jobs of no flow are pruned by age alone, through the
finished-at index as before (tests/integration/jobs/test_prune_plan.py),
and a flow's jobs only once the flow itself finished before the same
cutoff; :func:`prune_flows` then deletes the finished flows no job or dead
letter is left of, their steps and edges with them.

The other write by time that no worker makes: bringing scheduled jobs forward, for
``django_jobretry.testing.run_jobs(include_scheduled=True)``.

A test must not sleep through a backoff, and the database clock cannot be
moved. So the next scheduled jobs are moved to now instead. That is a write
of job state, so it lives with the other writes in the state machine
(docs/design.md#layers) and uses the database clock (docs/design.md#rule-5).
Only ``run_at`` of ready rows changes: attempts, history and everything a
worker's transitions fence on stay as they were.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, DurationField, Exists, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Now

from django_jobretry import signals
from django_jobretry.jobs import statements
from django_jobretry.models import KEEPS_KEY, DeadLetter, Flow, FlowStep, Job, JobStatus

logger = logging.getLogger("django_jobretry")

#: Rows deleted per transaction.
PRUNE_BATCH = 1000


def prune_succeeded(older_than: timedelta, *, dry_run: bool = False) -> int:
    """Delete succeeded jobs finished before now() - older_than (database clock).

    A job still inside its own ``unique_for`` is kept until that ends:
    deleting it would free its key early for enqueues with that window. A
    step's job is kept until its flow finished before the cutoff too.
    """
    cutoff = _cutoff(older_than)
    old = Job.objects.filter(status=JobStatus.SUCCEEDED, finished_at__lt=cutoff).exclude(KEEPS_KEY)
    alone = old.filter(flow_step__isnull=True)
    of_flows = old.filter(flow_step__in=FlowStep.objects.filter(flow__finished_at__lt=cutoff))
    if dry_run:
        return alone.count() + of_flows.count()
    count = _delete_in_batches(alone) + _delete_in_batches(of_flows)
    logger.info("pruned %d succeeded jobs", count, extra={"outcome": "pruned", "count": count})
    return count


def prune_flows(older_than: timedelta, *, dry_run: bool = False) -> int:
    """Delete the flows finished before now() - older_than with no job or dead letter left; how many.

    Run after :func:`prune_succeeded`, which deletes their succeeded jobs.
    A dead letter of a flow (a cancelled flow's stopped step, say) keeps it
    until an operator requeues or discards it, or dead-letter retention
    prunes it. The dry run counts the flows nothing would be left of once
    their old succeeded jobs went.
    """
    cutoff = _cutoff(older_than)
    dead = Exists(DeadLetter.objects.filter(flow_step__flow=OuterRef("pk")))
    jobs = Job.objects.filter(flow_step__flow=OuterRef("pk"))
    finished = Flow.objects.filter(finished_at__lt=cutoff).exclude(dead)
    if dry_run:
        kept = ~Q(status=JobStatus.SUCCEEDED) | Q(finished_at__gte=cutoff) | KEEPS_KEY
        return finished.exclude(Exists(jobs.filter(kept))).count()
    deleted = 0
    empty = finished.exclude(Exists(jobs))
    while True:
        with transaction.atomic():
            batch = list(
                empty.select_for_update(skip_locked=True)
                .order_by("pk")
                .values_list("pk", flat=True)[:PRUNE_BATCH]
            )
            if not batch:
                break
            _, gone = Flow.objects.filter(pk__in=batch).delete()  # its steps and edges cascade
        deleted += gone.get(Flow._meta.label, 0)
    if deleted:
        logger.info("pruned %d finished flows", deleted, extra={"outcome": "pruned_flows", "count": deleted})
    return deleted


def prune_dead_letters(older_than: timedelta, *, dry_run: bool = False) -> Counter[tuple[str, str]]:
    """Delete dead letters dead longer than ``older_than``; never silently.

    Before deleting, the counts per (queue, reason) are logged and sent as
    the ``dead_letters_pruning`` signal, so an operator can see (and alert
    on) what retention is about to remove. There is no count cap: only age.
    """
    old = DeadLetter.objects.filter(dead_at__lt=_cutoff(older_than))
    grouped = old.values("queue_name", "reason").annotate(n=Count("id")).order_by()
    counts: Counter[tuple[str, str]] = Counter(
        {(row["queue_name"], row["reason"]): row["n"] for row in grouped}
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
    _delete_in_batches(old)
    return counts


def _cutoff(older_than: timedelta) -> Any:
    return Now() - Value(older_than, output_field=DurationField())


def _delete_in_batches(rows: QuerySet[Any]) -> int:
    """Delete ``rows`` PRUNE_BATCH at a time, oldest ids first; returns how many went."""
    deleted = 0
    while True:
        with transaction.atomic():
            batch = list(
                rows.select_for_update(skip_locked=True)
                .order_by("pk")
                .values_list("pk", flat=True)[:PRUNE_BATCH]
            )
            if not batch:
                return deleted
            count = statements.prune(rows.model, batch)
        deleted += count


def bring_forward_next(
    *, queues: Sequence[str] | None = None, task_names: Sequence[str] | None = None
) -> list[int]:
    """Make the ready jobs with the earliest future ``run_at`` due now; returns their ids.

    Only the earliest (ties included) move, so that running them one group
    at a time keeps the order the schedule had - as if the clock jumped to
    the next scheduled time. ``queues`` and ``task_names`` limit which jobs
    are considered.
    """
    sql = statements.bring_forward_sql(queues=bool(queues), tasks=bool(task_names))
    params: dict[str, Any] = {"queues": list(queues or []), "tasks": list(task_names or [])}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        ids = sorted(row[0] for row in cursor.fetchall())
    if ids:
        logger.info(
            "%d scheduled job(s) brought forward to now",
            len(ids),
            extra={"job_ids": ids, "outcome": "brought_forward"},
        )
    return ids
