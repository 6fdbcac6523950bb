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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from django_jobretry.conf.schedule_runs import Run, run_columns
from django_jobretry.conf.schedules import ScheduleSpec
from django_jobretry.exceptions import JobRetryError
from django_jobretry.models import CounterEvent
from django_jobretry.policy.slots import CatchUp, Overlap, SlotPlan, grace, plan
from django_jobretry.services import schedule_sql as sql
from django_jobretry.services.console import counters
from django_jobretry.services.enqueue import notify
from django_jobretry.services.sql import named_rows

logger = logging.getLogger("django_jobretry")

#: What each catch-up policy calls the due slots it does not run.
DROPPED = {
    CatchUp.LATEST: "collapsed",
    CatchUp.ALL: "skipped over the catch-up limit",
    CatchUp.NONE: "missed",
}


def retry_until(spec: ScheduleSpec, next_slot: datetime) -> datetime | None:
    """When a run's retries stop: a grace before the schedule's next slot (half a period, at most a minute).

    Not at the slot itself: the last attempt must also end, and its run be
    buried, before the next slot's look, or under overlap "skip" that slot
    would find it still live. None when the schedule lets retries run on.
    """
    return next_slot - grace(spec.cadence, next_slot) if spec.retry_until_next_slot else None


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
    """One look at this process's due schedules; the seconds until the next slot is due (None: none).

    Four statements whatever the number of due schedules: lock them, insert
    every run, move every schedule on, count the runs (and one NOTIFY per queue).
    """
    if not specs:
        return None
    names = list(specs)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.LOCK_DUE, {"names": names, "limit": len(names)})
        looks = [
            _Look.of(specs[row["name"]], row["next_slot"], row["now"])
            for row in named_rows(cursor)
            # Declared otherwise by a newer (or older) deploy: its workers decide.
            if row["cadence"] == specs[row["name"]].cadence.describe()
        ]
        made = _insert_runs(cursor, looks)
        if looks:
            cursor.execute(sql.ADVANCE, as_arrays([look.outcome(made) for look in looks]))
        enqueued = [(look.run.task, look.run.queue) for look in looks if look.run for _ in look.made(made)]
        if enqueued:
            counters.count(CounterEvent.ENQUEUED, enqueued)
            notify(sorted({queue for _, queue in enqueued}))
    with connection.cursor() as cursor:
        cursor.execute(sql.UNTIL_NEXT, {"names": names})
        until = cursor.fetchone()[0]
    return None if until is None else float(until)


@dataclass(frozen=True)
class _Look:
    """One due schedule in one look: its slot plan and the run its slots make (None: refused)."""

    spec: ScheduleSpec
    slots: SlotPlan
    run: Run | None

    @classmethod
    def of(cls, spec: ScheduleSpec, next_slot: datetime, now: datetime) -> _Look:
        slots = plan(spec.cadence, next_slot, now, spec.catch_up, limit=spec.catch_up_limit)
        if not slots.run:
            return cls(spec, slots, None)
        try:
            return cls(spec, slots, run_columns(spec))
        except JobRetryError as exc:  # arguments, queue or policy: never a reason to stop the other schedules
            logger.error(
                "schedule %s: %d slot(s) up to %s not run: %s",
                spec.name,
                len(slots.run),
                slots.run[-1].isoformat(),
                exc,
                extra=log_fields(spec, "schedule_refused", slots=len(slots.run)),
            )
            return cls(spec, slots, None)

    @property
    def until(self) -> datetime | None:
        """When the runs' retries stop (unless the schedule says otherwise): see :func:`retry_until`."""
        return retry_until(self.spec, self.slots.next_slot)

    def made(self, made: Mapping[tuple[str, datetime], int]) -> list[tuple[datetime, int]]:
        """The (slot, job id) of each run this look inserted."""
        return [(slot, made[key]) for slot in self.slots.run if (key := (self.spec.name, slot)) in made]

    def outcome(self, made: Mapping[tuple[str, datetime], int]) -> dict[str, Any]:
        """The schedule's row after this look: where it continues and its counts; logs each slot."""
        spec, slots = self.spec, self.slots
        runs, next_slot, skipped = self.made(made), slots.next_slot, 0
        refused = len(slots.run) if self.run is None else 0
        for slot in slots.run if self.run is not None else ():
            job_id = made.get((spec.name, slot))
            if job_id is not None:
                logger.info(
                    "schedule %s: slot %s runs as job %s",
                    spec.name,
                    slot.isoformat(),
                    job_id,
                    extra=log_fields(spec, "schedule_run", slot=slot.isoformat(), job_id=job_id),
                )
            elif spec.overlap is Overlap.QUEUE:
                next_slot = slot  # waits for the live run; the next look tries this slot again
                break
            else:
                skipped += 1
                logger.info(
                    "schedule %s: slot %s skipped: its key is held (its last run, or its task's unique key)",
                    spec.name,
                    slot.isoformat(),
                    extra=log_fields(spec, "schedule_skipped", slot=slot.isoformat()),
                )
        if slots.dropped:
            _log_dropped(spec, slots)
        return {
            "name": spec.name,
            "next_slot": next_slot,
            "runs": len(runs),
            "skipped": skipped,
            "missed": slots.dropped,
            "refused": refused,
            "last_slot": runs[-1][0] if runs else None,
            "last_job": runs[-1][1] if runs else None,
        }


def _insert_runs(cursor: Any, looks: Sequence[_Look]) -> dict[tuple[str, datetime], int]:
    """Insert the runs of every look in one statement, oldest slot first; (schedule, slot) -> job id."""
    rows = [
        {**vars(look.run), "name": look.spec.name, "slot": slot, "until": look.until}
        for look in looks
        if look.run is not None
        for slot in look.slots.run
    ]
    if not rows:
        return {}
    cursor.execute(sql.INSERT_RUNS, as_arrays(rows))
    return {(name, slot): job_id for job_id, name, slot in cursor.fetchall()}


def as_arrays(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Rows (all with the same keys) as one array per key, for a statement over ``unnest``."""
    return {key: [row[key] for row in rows] for key in rows[0]}


def _log_dropped(spec: ScheduleSpec, slots: SlotPlan) -> None:
    """One line for the due slots a look did not run: how many, from when to when, and why."""
    logger.warning(
        "schedule %s: %s%d slot(s) from %s to %s %s (catch_up=%s)",
        spec.name,
        "at least " if slots.dropped_more else "",
        slots.dropped,
        slots.first_dropped.isoformat() if slots.first_dropped else "",
        slots.last_dropped.isoformat() if slots.last_dropped else "",
        DROPPED[spec.catch_up],
        spec.catch_up.value,
        extra=log_fields(spec, "schedule_missed", slots=slots.dropped),
    )


def record_successes(names: Iterable[str]) -> None:
    """Runs of these schedules succeeded: their rows keep the time, for "did not run" alerts."""
    unique = sorted(set(names))
    if unique:
        with connection.cursor() as cursor:
            cursor.execute(sql.SUCCEEDED, {"names": unique})


def log_fields(spec: ScheduleSpec, outcome: str, **more: Any) -> dict[str, Any]:
    return {"schedule": spec.name, "task": spec.task_name, "outcome": outcome, **more}
