"""What an operator does to a schedule: pause it, resume it, run it now - on every worker at once.

The state is the schedule's row, so a pause holds on every host and across
restarts, and a look (services/schedules.py) never runs a paused schedule.
Each action is logged with who did it; the admin also records it in its
history (admin/schedules.py).
"""

from __future__ import annotations

import logging

from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Now

from django_jobretry.conf.schedule_runs import run_columns
from django_jobretry.conf.schedules import ScheduleSpec, declared
from django_jobretry.console import counters
from django_jobretry.display.suggestions import did_you_mean
from django_jobretry.exceptions import InvalidJob
from django_jobretry.jobs.enqueue import notify
from django_jobretry.jobs.unique import holder_of
from django_jobretry.models import CounterEvent, JobStatus, Schedule
from django_jobretry.models.job import ACTOR_MAX_LENGTH
from django_jobretry.services import schedule_sql as sql
from django_jobretry.services.schedules import as_arrays, declare_rows, log_fields, retry_until

logger = logging.getLogger("django_jobretry")

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
        cursor.execute(sql.NOW)
        now = cursor.fetchone()[0]
        until = retry_until(spec, row.next_slot)
        cursor.execute(sql.INSERT_RUNS, as_arrays([{**vars(run), "name": name, "slot": now, "until": until}]))
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
