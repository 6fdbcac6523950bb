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

One bad schedule fails alone: when the statement for all of them fails, each
is written in a savepoint of its own, and the one that still fails is
logged by name and left due (jobs/isolation.py).
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
from django_jobretry.console import counters
from django_jobretry.exceptions import JobRetryError
from django_jobretry.jobs.enqueue import notify
from django_jobretry.jobs.isolation import Apart, all_or_each
from django_jobretry.jobs.sql import named_rows
from django_jobretry.models import CounterEvent, Schedule
from django_jobretry.policy.slots import CatchUp, Overlap, SlotPlan, grace, plan
from django_jobretry.services import schedule_sql as sql

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


def looks() -> Apart:
    """The schedules one scheduler acts on, look after look: each alone once a statement for all fails."""
    return Apart("schedule", "schedule")


def declare_rows(specs: Mapping[str, ScheduleSpec], apart: Apart | None = None) -> None:
    """Write this process's schedules to their rows (one statement): new ones start at their next slot.

    A declaration its row cannot hold (``check`` refuses it; a worker of an
    older version may still hold it) is left out, logged by name; any other
    that the statement cannot write is written alone (jobs/isolation.py).
    One bad declaration never keeps the others from running.
    """
    if not specs:
        return
    apart = apart or looks()
    with connection.cursor() as cursor:
        cursor.execute(sql.NOW)
        now = cursor.fetchone()[0]
        rows: list[dict[str, Any]] = []
        for spec in specs.values():
            if (why := unstorable(spec)) is not None:
                fields = log_fields(spec, "schedule_not_declared")
                logger.error("schedule %s not declared: %s; it makes no run", spec.name, why, extra=fields)
                continue
            with apart.one(spec.name, "find its next slot", savepoint=False):
                cadence = spec.cadence
                rows.append(
                    {
                        "name": spec.name,
                        "task": spec.task_name,
                        "cadence": cadence.describe(),
                        "next_slot": cadence.after(now),
                    }
                )
        all_or_each(
            apart,
            rows,
            lambda row: str(row["name"]),
            "declare its row",
            lambda some: cursor.execute(sql.DECLARE, as_arrays(some)),
        )


def unstorable(spec: ScheduleSpec) -> str | None:
    """Why ``spec``'s row could not hold it (a value longer than its column), or None."""
    for column, value in (
        ("name", spec.name),
        ("task_name", spec.task_name),
        ("cadence", spec.cadence.describe()),
    ):
        limit = getattr(Schedule._meta.get_field(column), "max_length", None)
        if limit is not None and len(value) > limit:
            return f"its {column.replace('_', ' ')} has {len(value)} characters, its column holds {limit}"
    return None


def run_due(specs: Mapping[str, ScheduleSpec], apart: Apart | None = None) -> float | None:
    """One look at this process's due schedules; the seconds until the next slot is due (None: none).

    Four statements whatever the number of due schedules: lock them, insert
    every run, move every schedule on, count the runs (and one NOTIFY per
    queue, and a savepoint around the two writes). If inserting or moving on
    fails, each schedule is done alone in a savepoint (jobs/isolation.py):
    the one that fails is logged by name and left due, the others run. ``apart``: the scheduler's own, so a
    schedule failing look after look is logged once per stretch, and its
    slot does not make the scheduler look again at once.
    """
    if not specs:
        return None
    apart = apart or looks()
    names = list(specs)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.LOCK_DUE, {"names": names, "limit": len(names)})
        due: list[_Look] = []
        for row in named_rows(cursor):
            spec = specs[row["name"]]
            if row["cadence"] != spec.cadence.describe():
                continue  # declared otherwise by a newer (or older) deploy: its workers decide
            with apart.one(spec.name, "plan its due slots", savepoint=False):
                due.append(_Look.of(spec, row["next_slot"], row["now"]))
        decided = all_or_each(
            apart,
            due,
            lambda look: look.spec.name,
            "insert its runs and move it on",
            lambda some: _decide(cursor, some),
        )
        for lines, _ in decided:
            _emit(lines)
        enqueued = [run for _, runs in decided for run in runs]
        if enqueued:
            counters.count(CounterEvent.ENQUEUED, enqueued)
            notify(sorted({queue for _, queue in enqueued}))
    with connection.cursor() as cursor:
        cursor.execute(sql.UNTIL_NEXT, {"names": [name for name in names if name not in apart.failing]})
        until = cursor.fetchone()[0]
    return None if until is None else float(until)


#: A log line held back until its statement is written: (level, format, args, extra).
_Line = tuple[int, str, tuple[Any, ...], dict[str, Any]]


def _decide(cursor: Any, looks: Sequence[_Look]) -> tuple[list[_Line], list[tuple[str, str]]]:
    """Insert the runs of ``looks`` and move their schedules on; their log lines and (task, queue) runs."""
    made = _insert_runs(cursor, looks)
    lines: list[_Line] = []
    cursor.execute(sql.ADVANCE, as_arrays([look.outcome(made, lines) for look in looks]))
    return lines, [(look.run.task, look.run.queue) for look in looks if look.run for _ in look.made(made)]


def _emit(lines: Sequence[_Line]) -> None:
    for level, message, args, extra in lines:
        logger.log(level, message, *args, extra=extra)


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

    def outcome(self, made: Mapping[tuple[str, datetime], int], lines: list[_Line]) -> dict[str, Any]:
        """The schedule's row after this look: where it continues and its counts; a line for each slot."""
        spec, slots = self.spec, self.slots
        runs, next_slot, skipped = self.made(made), slots.next_slot, 0
        refused = len(slots.run) if self.run is None else 0
        for slot in slots.run if self.run is not None else ():
            job_id = made.get((spec.name, slot))
            if job_id is not None:
                at = slot.isoformat()
                lines.append(
                    _line(logging.INFO, "slot %s runs as job %s", (at, job_id), spec, slot=at, job_id=job_id)
                )
            elif spec.overlap is Overlap.QUEUE:
                next_slot = slot  # waits for the live run; the next look tries this slot again
                break
            else:
                skipped += 1
                why = "slot %s skipped: its key is held (its last run, or its task's unique key)"
                at = slot.isoformat()
                lines.append(_line(logging.INFO, why, (at,), spec, outcome="schedule_skipped", slot=at))
        if slots.dropped:
            lines.append(_dropped(spec, slots))
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


def _dropped(spec: ScheduleSpec, slots: SlotPlan) -> _Line:
    """One line for the due slots a look did not run: how many, from when to when, and why."""
    first, last = (slot.isoformat() if slot else "" for slot in (slots.first_dropped, slots.last_dropped))
    more = "at least " if slots.dropped_more else ""
    args = (more, slots.dropped, first, last, DROPPED[spec.catch_up], spec.catch_up.value)
    message = "%s%d slot(s) from %s to %s %s (catch_up=%s)"
    return _line(logging.WARNING, message, args, spec, outcome="schedule_missed", slots=slots.dropped)


def _line(
    level: int,
    message: str,
    args: tuple[Any, ...],
    spec: ScheduleSpec,
    outcome: str = "schedule_run",
    **more: Any,
) -> _Line:
    """A line about ``spec``'s look: "schedule <name>: " then ``message``."""
    return level, f"schedule %s: {message}", (spec.name, *args), log_fields(spec, outcome, **more)


def record_successes(names: Iterable[str]) -> None:
    """Runs of these schedules succeeded: their rows keep the time, for "did not run" alerts."""
    unique = sorted(set(names))
    if unique:
        with connection.cursor() as cursor:
            cursor.execute(sql.SUCCEEDED, {"names": unique})


def log_fields(spec: ScheduleSpec, outcome: str, **more: Any) -> dict[str, Any]:
    return {"schedule": spec.name, "task": spec.task_name, "outcome": outcome, **more}
