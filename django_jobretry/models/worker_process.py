"""The WorkerProcess row: one `manage.py runworker` process, as its last heartbeat described it.

The jobs table says which worker holds a job (``lease_owner``), not which
workers exist: an idle worker, or one that died holding nothing, leaves no
trace there. Each worker therefore keeps a row of its own here, written by
its heartbeat thread (console/workers.py), and deletes it on a clean exit.
Whether a worker is live or lost is decided by the database's clock
(docs/design.md#rule-5), never stored: a stored flag would need the dead
worker to update it.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.db.models import ExpressionWrapper, F, Q
from django.db.models.functions import Now

from django_jobretry.conf.schema import LIMITS
from django_jobretry.models.fields import JSONStringArray
from django_jobretry.models.instants import holdable_times

#: The longest lease a worker can have (LEASE_SECONDS' range, and ``runworker --lease``).
LONGEST_LEASE = timedelta(seconds=LIMITS["LEASE_SECONDS"].maximum)

#: A worker whose last heartbeat is older than its lease is lost: by then its
#: jobs' leases have run out too, and lease recovery may take them.
LIVE = Q(last_heartbeat_at__gte=ExpressionWrapper(Now() - F("lease"), output_field=models.DateTimeField()))


#: ``LIVE`` as a column: ``.annotate(live=IS_LIVE)``.
IS_LIVE = ExpressionWrapper(LIVE, output_field=models.BooleanField())


class WorkerProcessQuerySet(models.QuerySet["WorkerProcess"]):
    """Live and lost, by the database clock, so every reader draws the line in the same place."""

    def with_status(self) -> WorkerProcessQuerySet:
        """Each row with ``live`` (bool) computed from the database clock."""
        return self.annotate(live=IS_LIVE)

    def live(self) -> WorkerProcessQuerySet:
        return self.filter(LIVE)

    def lost(self) -> WorkerProcessQuerySet:
        return self.exclude(LIVE)


class WorkerProcess(models.Model):
    """A worker process; written only by its own heartbeat thread and by lease recovery of lost ones."""

    worker_id = models.CharField(
        max_length=200, unique=True, help_text="host:pid:random, the same text as a job's lease owner."
    )
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    queues = models.JSONField(default=list, blank=True, help_text="Queue names; empty: every queue.")
    concurrency = models.PositiveIntegerField()
    pool = models.CharField(max_length=16)
    version = models.CharField(max_length=64, help_text="django-jobretry version the worker runs.")
    lease = models.DurationField(help_text="Lost when no heartbeat came for this long.")
    started_at = models.DateTimeField(db_default=Now())
    last_heartbeat_at = models.DateTimeField(db_default=Now())
    running_jobs = models.PositiveIntegerField(default=0, help_text="Jobs running at the last heartbeat.")

    objects = WorkerProcessQuerySet.as_manager()

    class Meta:
        verbose_name = "worker"
        # What a reader can load and list, and what keeps ``now() - lease`` within PostgreSQL's range.
        constraints = [
            *holdable_times("jobretry_worker", "started_at", "last_heartbeat_at"),
            models.CheckConstraint(
                condition=Q(lease__gt=timedelta(0), lease__lte=LONGEST_LEASE),
                name="jobretry_worker_lease_range",
            ),
            models.CheckConstraint(
                condition=JSONStringArray(F("queues")), name="jobretry_worker_queues_names"
            ),
        ]

    def __str__(self) -> str:
        return self.worker_id
