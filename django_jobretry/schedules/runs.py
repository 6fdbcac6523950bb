"""Periodic schedules: due slots made runs, exactly once per slot, with no leader; and the duty that looks.

Any worker may look (:class:`Scheduler`); a look locks the due schedule
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

The scheduler is a heartbeat duty (worker/lifecycle.py) that owns a thread of
its own: every worker that declares schedules runs one, on a connection of
its own. It writes the process's declarations to their rows at start, then
sleeps until the next slot is due (by the database clock, read at each
look) and looks. Not on the heartbeat thread: a look at a thousand
schedules must never delay a lease extension. A look that fails (the
database restarting, a table not migrated yet) is logged, once per failing
stretch, and retried after a pause; it never stops the worker.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connection, transaction

from django_jobretry.console import counters
from django_jobretry.exceptions import JobRetryError
from django_jobretry.jobs import statements
from django_jobretry.jobs.enqueue import notify
from django_jobretry.jobs.isolation import Apart, all_or_each
from django_jobretry.jobs.sql import named_rows
from django_jobretry.models import CounterEvent
from django_jobretry.policy.slots import CatchUp, Overlap, SlotPlan, plan
from django_jobretry.schedules import Run, ScheduleSpec, declared, run_columns
from django_jobretry.schedules import rows as sql
from django_jobretry.schedules.rows import as_arrays, declare_rows, log_fields, looks, retry_until
from django_jobretry.worker.lifecycle import Duty, Shift
from django_jobretry.worker.session import (
    drop_connection,
    log_database_error,
    mark_bookkeeping_thread,
    unmark_bookkeeping_thread,
)

logger = logging.getLogger("django_jobretry")

#: What each catch-up policy calls the due slots it does not run.
DROPPED = {
    CatchUp.LATEST: "collapsed",
    CatchUp.ALL: "skipped over the catch-up limit",
    CatchUp.NONE: "missed",
}
#: The longest the scheduler sleeps between looks: a schedule declared or resumed by another
#: process, or a paused one resumed, is seen within this.
MAX_SLEEP = 30.0
#: The shortest: a slot due already (a schedule waiting for its live run, overlap "queue")
#: is looked at again after this, not in a busy loop.
MIN_SLEEP = 0.5
#: After a failed look.
RETRY_AFTER = 5.0


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
    cursor.execute(statements.INSERT_RUNS, as_arrays(rows))
    return {(name, slot): job_id for job_id, name, slot in cursor.fetchall()}


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


class Scheduler(Duty):
    """Declares this process's schedules, then inserts their due runs until ``stop`` is set, on its thread."""

    failure = "look at the schedules"

    def __init__(
        self, worker_id: str, specs: Callable[[], Mapping[str, ScheduleSpec]], stop: threading.Event
    ) -> None:
        self.worker_id, self.specs, self.stop = worker_id, specs, stop
        #: This process's schedules, read and written to their rows at the first look.
        self.declared: Mapping[str, ScheduleSpec] | None = None
        #: Looks made so far.
        self.looks = 0
        #: Its schedules, each done alone when one statement for all fails: which failed last.
        self.apart = looks()
        self.thread = threading.Thread(target=self.run, name="jobretry-scheduler", daemon=True)

    @classmethod
    def serving(cls, shift: Shift) -> Scheduler | None:
        """A worker's scheduler, which stops when the worker stops claiming; None in burst mode.

        None too with ``runworker --no-schedules``, or when this process declares no schedule.
        """
        options = shift.options
        if not options.schedules or options.burst or not declared():
            return None
        return cls(shift.registration.worker_id, declared, shift.stopping)

    def start(self) -> None:
        """Its own thread, started with the heartbeat's duties: never on the heartbeat's."""
        self.thread.start()

    def run(self) -> None:
        mark_bookkeeping_thread()
        failing = False
        try:
            while not self.stop.is_set():
                try:
                    wait = self.look()
                except DatabaseError as exc:
                    level = logging.DEBUG if failing else logging.WARNING
                    log_database_error(level, "could not look at the schedules", exc, self.worker_id)
                    drop_connection()
                    failing, wait = True, RETRY_AFTER
                else:
                    failing = False
                self.stop.wait(wait)
        finally:
            unmark_bookkeeping_thread()
            drop_connection()

    def look(self) -> float:
        """Declare once, then one look; how long to sleep before the next.

        The declarations are read once, at the first look: they are complete
        once Django has started (a task registered later is check E015), and
        parsing a thousand of them again would cost every look more CPU than
        its statements take.
        """
        if self.declared is None:
            specs = self.specs()
            declare_rows(specs, self.apart)
            self.declared = specs
        until = run_due(self.declared, self.apart)
        self.looks += 1
        if until is None:
            return MAX_SLEEP
        return min(MAX_SLEEP, max(MIN_SLEEP if until <= 0 else 0.0, until))
