"""Periodic schedules: turning due slots into runs, exactly once per slot, with no leader.

Any worker may look (worker/scheduler.py); a look locks the due schedule
rows with SKIP LOCKED, inserts each slot's run and moves ``next_slot`` past
the slots it decided, all in one transaction. Whoever holds a row's lock
decides its slots, and its commit moves them out of everyone's reach, so
two workers never decide one slot, and a worker killed mid-look decides
nothing (its transaction rolls back; the next look does it). The jobs table
backs this with a unique key per (schedule, slot). Slots are compared with
the database clock, so hosts whose clocks disagree still agree on slots.

Each run is an ordinary job with its task's policy; by default its retries
stop before the schedule's next slot (``retry_until``). Every slot that does
not run is counted on the schedule's row and logged with its time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.schedules import ScheduleSpec
from django_jobretry.exceptions import InvalidJob
from django_jobretry.models import CounterEvent
from django_jobretry.policy.slots import CatchUp, Overlap, SlotPlan, plan
from django_jobretry.registry import registry, resolve_policy
from django_jobretry.services import schedule_sql as sql
from django_jobretry.services.console import counters
from django_jobretry.services.enqueue import notify
from django_jobretry.services.sql import named_rows
from django_jobretry.signatures import check_call
from django_jobretry.validation import encode_arguments

logger = logging.getLogger("django_jobretry")

#: What each catch-up policy calls the due slots it does not run.
DROPPED = {
    CatchUp.LATEST: "collapsed",
    CatchUp.ALL: "skipped over the catch-up limit",
    CatchUp.NONE: "missed",
}


def overlap_key(name: str) -> str:
    """The unique key every run of ``name`` holds while live, under overlap "skip" and "queue"."""
    return f"schedule:{name}"


@dataclass(frozen=True)
class Run:
    """The columns of one schedule's runs, as its task is declared in this process now."""

    task: str
    queue: str
    policy: str
    priority: int
    max_attempts: int
    args: str
    kwargs: str
    key: str | None


def run_columns(spec: ScheduleSpec) -> Run:
    """The run of ``spec`` as a job; InvalidJob when its task is unknown here or refuses its arguments."""
    definition = registry.get(spec.task_name)
    if definition is None:
        raise InvalidJob(f"task {spec.task_name!r} is not registered in this process")
    arguments = encode_arguments(
        spec.task_name,
        spec.args,
        dict(spec.kwargs),
        max_bytes=jobretry_settings.max_args_bytes,
        max_depth=jobretry_settings.max_args_depth,
    )
    check_call(
        spec.task_name, definition.func, spec.args, dict(spec.kwargs), takes_context=definition.takes_context
    )
    policy_name, policy = resolve_policy(definition.policy)
    return Run(
        task=spec.task_name,
        queue=spec.queue_name or definition.queue_name,
        policy=policy_name,
        priority=definition.priority,
        max_attempts=policy.max_attempts,
        args=arguments.args_json,
        kwargs=arguments.kwargs_json,
        key=None if spec.overlap is Overlap.ALLOW else overlap_key(spec.name),
    )


def declare_rows(specs: Mapping[str, ScheduleSpec]) -> None:
    """Write this process's schedules to their rows (one statement): new ones start at their next slot."""
    if not specs:
        return
    with connection.cursor() as cursor:
        cursor.execute(sql.NOW)
        now = cursor.fetchone()[0]
        ordered = list(specs.values())
        cursor.execute(
            sql.DECLARE,
            {
                "names": [spec.name for spec in ordered],
                "tasks": [spec.task_name for spec in ordered],
                "cadences": [spec.cadence.describe() for spec in ordered],
                "nexts": [spec.cadence.after(now) for spec in ordered],
            },
        )


def run_due(specs: Mapping[str, ScheduleSpec]) -> float | None:
    """One look at this process's due schedules; the seconds until the next slot is due (None: none)."""
    if not specs:
        return None
    names = list(specs)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.LOCK_DUE, {"names": names, "limit": len(names)})
        enqueued: list[tuple[str, str]] = []
        for row in named_rows(cursor):
            spec = specs[row["name"]]
            if row["cadence"] != spec.cadence.describe():
                continue  # declared otherwise by a newer (or older) deploy: its workers decide
            enqueued += _decide(cursor, spec, row["next_slot"], row["now"])
        if enqueued:
            counters.count(CounterEvent.ENQUEUED, enqueued)
            notify(sorted({queue for _, queue in enqueued}))
    with connection.cursor() as cursor:
        cursor.execute(sql.UNTIL_NEXT, {"names": names})
        until = cursor.fetchone()[0]
    return None if until is None else float(until)


def _decide(cursor: Any, spec: ScheduleSpec, next_slot: datetime, now: datetime) -> list[tuple[str, str]]:
    """Insert the runs of ``spec``'s due slots and move it on; the (task, queue) of each run inserted."""
    slots = plan(spec.cadence, next_slot, now, spec.catch_up, limit=spec.catch_up_limit)
    if not slots.run:
        _advance(cursor, spec, slots, slots.next_slot)
        return []
    try:
        run = run_columns(spec)
    except InvalidJob as exc:
        refused = len(slots.run)
        logger.error(
            "schedule %s: %d slot(s) up to %s not run: %s",
            spec.name,
            refused,
            slots.run[-1].isoformat(),
            exc,
            extra=log_fields(spec, "schedule_refused", slots=refused),
        )
        _advance(cursor, spec, slots, slots.next_slot, refused=refused)
        return []
    inserted: list[tuple[datetime, int]] = []
    skipped, resume_at = 0, slots.next_slot
    until = slots.next_slot if spec.retry_until_next_slot else None
    for slot in slots.run:
        cursor.execute(sql.INSERT_RUN, {**vars(run), "name": spec.name, "slot": slot, "until": until})
        created = cursor.fetchone()
        if created is not None:
            inserted.append((slot, created[0]))
            logger.info(
                "schedule %s: slot %s runs as job %s",
                spec.name,
                slot.isoformat(),
                created[0],
                extra=log_fields(spec, "schedule_run", slot=slot.isoformat(), job_id=created[0]),
            )
        elif spec.overlap is Overlap.QUEUE:
            resume_at = slot  # waits for the live run; the next look tries this slot again
            break
        else:
            skipped += 1
            logger.info(
                "schedule %s: slot %s skipped: its last run is still ready, running or retrying",
                spec.name,
                slot.isoformat(),
                extra=log_fields(spec, "schedule_skipped", slot=slot.isoformat()),
            )
    _advance(cursor, spec, slots, resume_at, inserted=inserted, skipped=skipped)
    return [(run.task, run.queue)] * len(inserted)


def _advance(
    cursor: Any,
    spec: ScheduleSpec,
    slots: SlotPlan,
    next_slot: datetime,
    *,
    inserted: Iterable[tuple[datetime, int]] = (),
    skipped: int = 0,
    refused: int = 0,
) -> None:
    """Move the schedule on to ``next_slot``, counting what became of the due slots; log the dropped."""
    runs = list(inserted)
    if slots.dropped:
        more = "at least " if slots.dropped_more else ""
        logger.warning(
            "schedule %s: %s%d slot(s) from %s to %s %s (catch_up=%s)",
            spec.name,
            more,
            slots.dropped,
            slots.first_dropped.isoformat() if slots.first_dropped else "",
            slots.last_dropped.isoformat() if slots.last_dropped else "",
            DROPPED[spec.catch_up],
            spec.catch_up.value,
            extra=log_fields(spec, "schedule_missed", slots=slots.dropped),
        )
    cursor.execute(
        sql.ADVANCE,
        {
            "name": spec.name,
            "next_slot": next_slot,
            "runs": len(runs),
            "skipped": skipped,
            "missed": slots.dropped,
            "refused": refused,
            "last_slot": runs[-1][0] if runs else None,
            "last_job": runs[-1][1] if runs else None,
        },
    )


def record_successes(names: Iterable[str]) -> None:
    """Runs of these schedules succeeded: their rows keep the time, for "did not run" alerts."""
    unique = sorted(set(names))
    if unique:
        with connection.cursor() as cursor:
            cursor.execute(sql.SUCCEEDED, {"names": unique})


def log_fields(spec: ScheduleSpec, outcome: str, **more: Any) -> dict[str, Any]:
    return {"schedule": spec.name, "task": spec.task_name, "outcome": outcome, **more}
