"""Where each schedule stands, for operators: the admin, `jobstatus`, `manage.py schedules`, the metrics.

A schedule lives in two places: its declaration in this deploy's code and
settings (schedules/__init__.py), and its row in the database, which the
workers write. An operator needs both: a row whose name this deploy no
longer declares is left from an older deploy (nothing runs it), and a
declaration without a row has not been started by any worker yet. So the
listing merges them by name.

What became of the last run is read in the same query as the rows (one
query for all schedules, whatever their number): the job's status by its
primary key, or, once the job has died, its dead letter by the dead
letters' ``job_id`` index. A run's dead letter always keeps the job's id,
so that index finds it; a run that is in neither table was pruned after it
succeeded, or was requeued (the job admin's "not found" page says which).
Ages are measured on the database clock (docs/design.md#rule-5).

The metrics (:func:`collect`) are read with the same one query, at each
scrape. Only schedules with a row are shown: the row is the state every
worker shares; a declaration no worker has started has no slots yet. The
period is exported so that "no success for longer than two periods" is one
alert rule for every schedule (docs/metrics.md), whatever its cadence.
prometheus_client is optional (``django-jobretry[prometheus]``): it is
imported when the metrics view scrapes, never with this module.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from django.db import connection
from django.db.models import OuterRef, Subquery
from django.db.models.functions import Now

from django_jobretry.models import DeadLetter, DeadLetterSource, Job, JobStatus, Schedule
from django_jobretry.policy.slots import MAX_GRACE, Cadence
from django_jobretry.schedules import ScheduleSpec, declared

if TYPE_CHECKING:
    from prometheus_client.core import Metric

#: A schedule row this deploy does not declare (left from an older one): nothing runs it.
NOT_DECLARED = "not declared in this deploy"
#: What became of a schedule's last run, by its key (also the JSON value of ``jobstatus --json``).
OUTCOMES = {
    "none": "no run yet",
    "ready": "ready",
    "retrying": "retrying",
    "running": "running",
    "succeeded": "succeeded",
    "dead": "dead",
    "gone": "no longer in the tables (pruned, or requeued)",
}

_JOB = Job.objects.filter(pk=OuterRef("last_job_id"))
_DEAD = DeadLetter.objects.filter(job_id=OuterRef("last_job_id"), source=DeadLetterSource.JOBRETRY).order_by(
    "-pk"
)
#: The columns of the last run, annotated on Schedule rows (the admin's list uses them too).
LAST_RUN = {
    "jobretry_job_status": Subquery(_JOB.values("status")[:1]),
    "jobretry_job_attempts": Subquery(_JOB.values("attempts")[:1]),
    "jobretry_dead_letter_id": Subquery(_DEAD.values("pk")[:1]),
    "jobretry_dead_reason": Subquery(_DEAD.values("reason")[:1]),
}


@dataclass(frozen=True)
class LastRun:
    """The last run of a schedule: its slot, its job, and what became of it (a key of OUTCOMES)."""

    slot: datetime | None
    job_id: int | None
    outcome: str
    dead_letter_id: int | None = None
    #: The dead letter's reason, or the attempt a retrying run waits for ("attempt 3").
    detail: str = ""

    def __str__(self) -> str:
        words = OUTCOMES[self.outcome]
        return f"{words} ({self.detail})" if self.detail else words


def last_run(row: Any) -> LastRun:
    """What became of ``row``'s last run, from a Schedule row annotated with :data:`LAST_RUN`."""
    job_id, slot = row.last_job_id, row.last_slot
    if job_id is None:
        return LastRun(slot, None, "none")
    if row.jobretry_dead_letter_id is not None:
        return LastRun(slot, job_id, "dead", row.jobretry_dead_letter_id, row.jobretry_dead_reason)
    status, attempts = row.jobretry_job_status, row.jobretry_job_attempts
    if status is None:
        return LastRun(slot, job_id, "gone")
    if status == JobStatus.READY and attempts:
        return LastRun(slot, job_id, "retrying", detail=f"attempt {attempts + 1}")
    return LastRun(slot, job_id, str(status))


@dataclass(frozen=True)
class ScheduleState:
    """One schedule as an operator sees it: declared here or not, its row's state, its last run."""

    name: str
    task: str
    #: One line (policy.slots.Cadence.describe): what the workers follow, the row's (if any).
    cadence: str
    #: This deploy's cadence line; None when this deploy does not declare it. It differs from
    #: ``cadence`` until a worker of this deploy starts (its slots then start over).
    declared_cadence: str | None
    #: The time zone its cron is read in (UTC for an interval); None when this deploy does not declare it.
    zone: str | None
    #: Whether a worker has written its row yet (False: declared here, no worker started since).
    has_row: bool
    #: The next slot; for a schedule with no row, the first slot after now, where a worker would start it.
    next_slot: datetime | None
    last: LastRun
    last_success_at: datetime | None
    last_success_age: timedelta | None
    runs: int
    skipped: int
    missed: int
    refused: int
    paused_at: datetime | None
    paused_by: str
    pause_reason: str
    #: The longer of its current period and the one before (see :func:`period`); None when not declared here.
    period: timedelta | None

    @property
    def declared(self) -> bool:
        return self.declared_cadence is not None


#: Why a schedule needs an operator, by key (the dashboard's Schedules panel).
TROUBLES = {
    "paused": "paused",
    "late": "late: its due slot has not been run",
    "failing": "failing",
}


def troubles(state: ScheduleState, now: datetime) -> list[str]:
    """Why ``state`` needs an operator (keys of :data:`TROUBLES`); empty when it runs as it should.

    Late: its next slot passed more than a grace ago (half a period, at most
    a minute, as the workers judge a slot on time) and no worker ran it -
    no worker is running schedules. Failing: its last run died or is
    retrying, or its last success is older than two periods (the alert of
    docs/schedules.md). A paused schedule is neither late nor failing.
    """
    if state.paused_at is not None:
        return ["paused"]
    found = []
    due = state.next_slot if state.has_row and state.period is not None else None
    if due is not None and state.period is not None and now - due > min(MAX_GRACE, state.period / 2):
        found.append("late")
    stale = state.period is not None and (state.last_success_age or timedelta(0)) > 2 * state.period
    if state.last.outcome in ("dead", "retrying") or stale:
        found.append("failing")
    return found


def period(cadence: Cadence, next_slot: datetime) -> timedelta:
    """The longer of the period ending at ``next_slot`` and the one before it.

    An interval's period is the interval; a cron's may vary (weekdays only,
    business hours). Taking the longer of the last two periods means a last
    success older than twice this is older than the slot two slots before
    ``next_slot``: two slots came due since, and the earlier had its whole
    period to succeed - not one failure across a weekend.
    """
    if cadence.every is not None:
        return cadence.every
    earlier = list(islice(cadence.slots_before(next_slot), 2))
    return max(next_slot - earlier[0], earlier[0] - earlier[1])


def zoned(moment: datetime, zone: str) -> str:
    """``moment`` in ``zone`` to the second, with the zone's abbreviation: "2026-12-02 04:00:00 CET"."""
    return moment.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")


def utc(moment: datetime) -> str:
    """``moment`` in UTC to the second: "2026-12-02 03:00:00 UTC"."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def listing() -> tuple[datetime, list[ScheduleState]]:
    """The database's now, and every schedule row and declaration by name: one query for all rows."""
    specs = declared()
    rows = list(Schedule.objects.annotate(jobretry_now=Now(), **LAST_RUN).order_by("name"))
    now = rows[0].jobretry_now if rows else _now()
    found = {row.name: _state(row, specs.get(row.name), now) for row in rows}
    for name, spec in specs.items():
        found.setdefault(name, _unstarted(spec, now))
    return now, [found[name] for name in sorted(found)]


def _now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        now: datetime = cursor.fetchone()[0]
    return now


def _state(row: Any, spec: ScheduleSpec | None, now: datetime) -> ScheduleState:
    success = row.last_success_at
    return ScheduleState(
        name=row.name,
        task=row.task_name,
        cadence=row.cadence,
        declared_cadence=spec.cadence.describe() if spec else None,
        zone=spec.cadence.tz if spec else None,
        has_row=True,
        next_slot=row.next_slot,
        last=last_run(row),
        last_success_at=success,
        last_success_age=None if success is None else max(now - success, timedelta(0)),
        runs=row.runs,
        skipped=row.skipped,
        missed=row.missed,
        refused=row.refused,
        paused_at=row.paused_at,
        paused_by=row.paused_by,
        pause_reason=row.pause_reason,
        period=period(spec.cadence, row.next_slot) if spec else None,
    )


def _unstarted(spec: ScheduleSpec, now: datetime) -> ScheduleState:
    first = spec.cadence.after(now)
    return ScheduleState(
        name=spec.name,
        task=spec.task_name,
        cadence=spec.cadence.describe(),
        declared_cadence=spec.cadence.describe(),
        zone=spec.cadence.tz,
        has_row=False,
        next_slot=first,
        last=LastRun(None, None, "none"),
        last_success_at=None,
        last_success_age=None,
        runs=0,
        skipped=0,
        missed=0,
        refused=0,
        paused_at=None,
        paused_by="",
        pause_reason="",
        period=period(spec.cadence, first),
    )


# -- the metrics --------------------------------------------------------------------------------------


#: The outcomes of ``jobretry_schedule_slots_total``, by the row's count each reads.
SLOT_OUTCOMES = {"run": "runs", "skipped": "skipped", "missed": "missed", "refused": "refused"}


def collect() -> Iterator[Metric]:
    """Every schedule metric, labelled by the schedule's name (features.py: the metrics view's part)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    success = GaugeMetricFamily(
        "jobretry_schedule_last_success_timestamp_seconds",
        "When a run of the schedule last succeeded (Unix time); absent until one has.",
        labels=["schedule"],
    )
    next_slot = GaugeMetricFamily(
        "jobretry_schedule_next_slot_timestamp_seconds",
        "The schedule's next slot not decided yet (Unix time); in the past while paused or not run.",
        labels=["schedule"],
    )
    period = GaugeMetricFamily(
        "jobretry_schedule_period_seconds",
        "The longer of the schedule's current period and the one before; absent when not declared here.",
        labels=["schedule"],
    )
    slots = CounterMetricFamily(
        "jobretry_schedule_slots",
        "Slots of the schedule by what became of them: run, skipped (overlap), missed (catch-up), refused.",
        labels=["schedule", "outcome"],
    )
    paused = GaugeMetricFamily(
        "jobretry_schedule_paused",
        "1 while an operator has the schedule paused, else 0.",
        labels=["schedule"],
    )
    _, states = listing()
    for state in states:
        if not state.has_row or state.next_slot is None:
            continue
        name = [state.name]
        if state.last_success_at is not None:
            success.add_metric(name, state.last_success_at.timestamp())
        next_slot.add_metric(name, state.next_slot.timestamp())
        if state.period is not None:
            period.add_metric(name, state.period.total_seconds())
        for outcome, field in SLOT_OUTCOMES.items():
            slots.add_metric([state.name, outcome], getattr(state, field))
        paused.add_metric(name, 0 if state.paused_at is None else 1)
    yield from (success, next_slot, period, slots, paused)
