"""A job's sub-states: computed from its row and the holds, never stored (docs/design.md#states).

``status`` stores three states (ready, running, succeeded). Pauses,
breakers, limits, snoozes and cancels added sub-states that no column
stores: a pause rewrites no rows and a slot frees with its lease
(decisions 0008 and 0009). Each is defined here once, as a filter on job rows: the
admin, `jobstatus` and the tests use these, so they agree on what "held"
or "waiting for a slot" means.

The statuses are written as their values ("ready"): models/job.py imports
this module, and the holds' models are looked up by name because
models/holds.py imports models/job.py.
"""

from __future__ import annotations

from typing import Self, TypeVar

from django.apps import apps
from django.db import models
from django.db.models import Exists, OuterRef, Q
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Now
from django.db.models.lookups import Exact

#: The job model: generic here, since models/job.py imports this module (JobQuerySet binds it).
_Job = TypeVar("_Job", bound=models.Model)

#: A pause in force: no ``until``, or one still ahead.
PAUSE_IN_FORCE = Q(until__isnull=True) | Q(until__gt=Now())
#: Ready jobs whose time has come: what the claim takes unless a hold keeps them.
DUE = Q(status="ready", run_at__lte=Now())
#: How the last ended attempt ended: its history entry's ``ended`` (jobs/history.py AttemptEnd).
LAST_ENDED = KeyTextTransform("ended", KeyTransform(-1, "errors"))


def _breakers() -> models.QuerySet[models.Model]:
    """The breaker of the job's task when it is not closed and the job is not its probe."""
    circuit = apps.get_model("django_jobretry", "Circuit")
    return (
        circuit.objects.filter(task_name=OuterRef("task_name"))
        .exclude(state="closed")
        .exclude(probe_job_id=OuterRef("pk"))
    )


def held_filter() -> Q:
    """Held: ready and due behind a pause in force or its task's breaker, or parked at that breaker's end."""
    pause = apps.get_model("django_jobretry", "Pause")
    paused = pause.objects.filter(PAUSE_IN_FORCE).filter(
        Q(queue_name=OuterRef("queue_name")) | Q(task_name=OuterRef("task_name"))
    )
    behind_breaker = _breakers().filter(open_until__gte=OuterRef("run_at"))
    return (DUE & (Q(Exists(paused)) | Q(Exists(_breakers())))) | (
        Q(status="ready") & Q(Exists(behind_breaker))
    )


def parked_filter() -> Q:
    """Parked: ready, and moved to its task's open breaker's end (``run_at = open_until``, still ahead)."""
    at_end = _breakers().filter(state="open", open_until=OuterRef("run_at"))
    return Q(status="ready", run_at__gt=Now()) & Q(Exists(at_end))


#: Waiting for a lane slot: due, with a lane (``limit_lane``); only the limited pick takes it.
WAITING_FOR_SLOT = DUE & Q(limit_lane__isnull=False)
#: Snoozed: ready, its last attempt given back by ``raise Snooze``, not claimed since.
SNOOZED = Q(status="ready") & Q(Exact(LAST_ENDED, "snoozed"))
#: Cancel requested: running, and its worker is to stop it at its next heartbeat.
CANCEL_REQUESTED = Q(status="running", cancel_requested_at__isnull=False)


class JobSubStates(models.QuerySet[_Job]):
    """The computed sub-states by name, beside ``ready()`` and ``retrying()`` (models/job.py)."""

    def held(self) -> Self:
        """Kept from the claim by a pause or a breaker: the admin's ``?held=yes``, `jobstatus`'s holds."""
        return self.filter(held_filter())

    def parked(self) -> Self:
        """Held by an open breaker and moved to its end by a heartbeat (jobs/statements.py PARK)."""
        return self.filter(parked_filter())

    def waiting_for_slot(self) -> Self:
        """Due jobs with a lane, left to the limited pick: `jobstatus`'s Limits "held" counts."""
        return self.filter(WAITING_FOR_SLOT)

    def snoozed(self) -> Self:
        """Ready again after ``raise Snooze``, their attempt given back, not claimed since."""
        return self.filter(SNOOZED)

    def cancel_requested(self) -> Self:
        """Running jobs an operator cancelled: their worker stops them at its next heartbeat."""
        return self.filter(CANCEL_REQUESTED)
