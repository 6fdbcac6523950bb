"""A schedule's row: every statement on it, and each write to it besides a look's.

The statements are written once, named, here: the look's (schedules/runs.py);
the one that inserts a slot's runs writes job rows, so it is
jobs/statements.INSERT_RUNS, with every other job write. Times are the database's
(docs/design.md#rule-5): a slot is due when ``statement_timestamp()`` has
passed it, whatever a worker's own clock says.

Besides a look, a row is written when a worker declares its schedules
(:func:`declare_rows`), when a run succeeds (:func:`record_successes`), and
when an operator pauses, resumes or runs a schedule now, on every worker at
once. The state is the schedule's row, so a pause holds on every host and
across restarts, and a look never runs a paused schedule. Each action is
logged with who did it; the admin also records it in its history
(schedules/admin_actions.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Now

from django_jobretry.console import counters
from django_jobretry.display import did_you_mean
from django_jobretry.exceptions import InvalidJob
from django_jobretry.jobs import statements
from django_jobretry.jobs.enqueue import holder_of, notify
from django_jobretry.jobs.isolation import Apart, all_or_each
from django_jobretry.models import CounterEvent, JobStatus, Schedule
from django_jobretry.models.job import ACTOR_MAX_LENGTH
from django_jobretry.policy.slots import grace
from django_jobretry.schedules import ScheduleSpec, declared, run_columns

logger = logging.getLogger("django_jobretry")

SCHEDULE = Schedule._meta.db_table

#: The database's clock, which slots are compared with.
NOW = "SELECT statement_timestamp() AS now"

#: Declare this process's schedules: new ones start at their first slot after now; one whose
#: cadence changed starts over there; an unchanged one keeps its next slot and its counts.
DECLARE = f"""
    INSERT INTO {SCHEDULE} AS s (name, task_name, cadence, next_slot, declared_at,
                                 runs, skipped, missed, refused, paused_by, pause_reason)
    SELECT d.name, d.task_name, d.cadence, d.next_slot, statement_timestamp(), 0, 0, 0, 0, '', ''
    FROM unnest(%(name)s::text[], %(task)s::text[], %(cadence)s::text[], %(next_slot)s::timestamptz[])
        AS d(name, task_name, cadence, next_slot)
    ON CONFLICT (name) DO UPDATE SET
        task_name = EXCLUDED.task_name, declared_at = EXCLUDED.declared_at, cadence = EXCLUDED.cadence,
        next_slot = CASE WHEN s.cadence = EXCLUDED.cadence THEN s.next_slot ELSE EXCLUDED.next_slot END
"""

#: Lock the due schedules of this process, oldest slot first, skipping those another worker holds:
#: whoever holds a row decides its due slots, and moves ``next_slot`` past them before it commits.
LOCK_DUE = f"""
    SELECT name, cadence, next_slot, statement_timestamp() AS now FROM {SCHEDULE}
    WHERE name = ANY(%(names)s) AND paused_at IS NULL AND next_slot <= statement_timestamp()
    ORDER BY next_slot
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
"""

#: The most a count column (bigint) holds.
COUNT_MAX = 2**63 - 1


def counted(column: str) -> str:
    """``column`` plus the look's count, stopping at :data:`COUNT_MAX`: a full count never fails a look."""
    return f"s.{column} + LEAST(d.{column}, {COUNT_MAX} - s.{column})"


#: What one look decided for each schedule: where it continues, and what became of its due slots.
ADVANCE = f"""
    UPDATE {SCHEDULE} AS s SET next_slot = d.next_slot, runs = {counted("runs")},
        skipped = {counted("skipped")}, missed = {counted("missed")}, refused = {counted("refused")},
        last_slot = COALESCE(d.last_slot, s.last_slot), last_job_id = COALESCE(d.last_job, s.last_job_id)
    FROM unnest(%(name)s::text[], %(next_slot)s::timestamptz[], %(runs)s::bigint[], %(skipped)s::bigint[],
                %(missed)s::bigint[], %(refused)s::bigint[], %(last_slot)s::timestamptz[],
                %(last_job)s::bigint[])
        AS d(name, next_slot, runs, skipped, missed, refused, last_slot, last_job)
    WHERE s.name = d.name
"""

#: Seconds until the next slot of this process's schedules comes due (negative: due already).
UNTIL_NEXT = f"""
    SELECT extract(epoch FROM min(next_slot) - statement_timestamp())::float8 FROM {SCHEDULE}
    WHERE name = ANY(%(names)s) AND paused_at IS NULL
"""

#: Runs of these schedules succeeded just now: the time a "did not run" alert reads.
SUCCEEDED = f"UPDATE {SCHEDULE} SET last_success_at = statement_timestamp() WHERE name = ANY(%(names)s)"


# -- a worker's declarations, and what every write shares ------------------------------------------


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
        cursor.execute(NOW)
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
            lambda some: cursor.execute(DECLARE, as_arrays(some)),
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


def as_arrays(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Rows (all with the same keys) as one array per key, for a statement over ``unnest``."""
    return {key: [row[key] for row in rows] for key in rows[0]}


def record_successes(names: Iterable[str]) -> None:
    """Runs of these schedules succeeded: their rows keep the time, for "did not run" alerts."""
    unique = sorted(set(names))
    if unique:
        with connection.cursor() as cursor:
            cursor.execute(SUCCEEDED, {"names": unique})


def log_fields(spec: ScheduleSpec, outcome: str, **more: Any) -> dict[str, Any]:
    return {"schedule": spec.name, "task": spec.task_name, "outcome": outcome, **more}


# -- what an operator does: pause, resume, run now ---------------------------------------------------


#: How much of an operator's reason for a pause is kept (the column's length).
PAUSE_REASON_CHARS = 500


class ScheduleNotFound(InvalidJob):
    """No schedule of that name is declared in this process."""


def _spec(name: str) -> ScheduleSpec:
    spec = declared().get(name)
    if spec is None:
        known = did_you_mean([name], declared())
        raise ScheduleNotFound(f"no schedule {name!r} is declared in this process.{known}")
    return spec


def pause(name: str, *, actor: str, reason: str = "") -> bool:
    """Stop ``name`` making runs until resumed, on every worker; False if it was paused already.

    Runs already made go on. Slots that come due while paused are decided at
    the first look after the resume, by the schedule's catch-up policy, as
    after downtime.
    """
    spec = _spec(name)
    declare_rows({name: spec})
    paused = Schedule.objects.filter(name=name, paused_at=None).update(
        paused_at=Now(), paused_by=actor[:ACTOR_MAX_LENGTH], pause_reason=reason[:PAUSE_REASON_CHARS]
    )
    if paused:
        logger.info(
            "schedule %s paused by %s", name, actor, extra=log_fields(spec, "schedule_paused", actor=actor)
        )
    return bool(paused)


def resume(name: str, *, actor: str) -> bool:
    """Let ``name`` make runs again; False if it was not paused."""
    spec = _spec(name)
    resumed = Schedule.objects.filter(name=name, paused_at__isnull=False).update(
        paused_at=None, paused_by="", pause_reason=""
    )
    if resumed:
        logger.info(
            "schedule %s resumed by %s", name, actor, extra=log_fields(spec, "schedule_resumed", actor=actor)
        )
    return bool(resumed)


def run_now(name: str, *, actor: str) -> int:
    """One run of ``name`` now, outside its slots (its slot is the database's now); the new job's id.

    Overlap holds as for a slot: under "skip" and "queue" no second run
    starts while one is live (:class:`RunRefused` says which). The run's
    retries stop before the schedule's next slot, as a slot's do.
    """
    spec = _spec(name)
    run = run_columns(spec)
    declare_rows({name: spec})
    with transaction.atomic(), connection.cursor() as cursor:
        row = Schedule.objects.select_for_update().get(name=name)
        cursor.execute(NOW)
        now = cursor.fetchone()[0]
        until = retry_until(spec, row.next_slot)
        cursor.execute(
            statements.INSERT_RUNS, as_arrays([{**vars(run), "name": name, "slot": now, "until": until}])
        )
        created = cursor.fetchone()
        if created is None:
            holder = holder_of(run.key, run.held_for) if run.key else None
            if holder is not None and holder.status == JobStatus.SUCCEEDED:
                raise RunRefused(
                    f"schedule {name!r}: job {holder.pk} with its task's unique key succeeded less than "
                    f"unique_for ({run.held_for}) ago"
                )
            held = holder.pk if holder is not None else None
            raise RunRefused(f"schedule {name!r} has a run still ready, running or retrying (job {held})")
        Schedule.objects.filter(name=name).update(runs=F("runs") + 1, last_slot=now, last_job_id=created[0])
        counters.count(CounterEvent.ENQUEUED, [(run.task, run.queue)])
        notify([run.queue])
    logger.info(
        "schedule %s: run now by %s as job %s",
        name,
        actor,
        created[0],
        extra=log_fields(spec, "schedule_run_now", actor=actor, job_id=created[0]),
    )
    return int(created[0])


class RunRefused(InvalidJob):
    """A run now was refused: the schedule's overlap policy keeps a second run from starting."""
