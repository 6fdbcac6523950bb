"""The WorkerProcess row: one `manage.py runworker` process, as its last heartbeat described it.

The jobs table says which worker holds a job (``lease_owner``), not which
workers exist: an idle worker, or one that died holding nothing, leaves no
trace there. Each worker therefore keeps a row of its own here, written by
its heartbeat thread (services/workers.py), and deletes it on a clean exit.
Whether a worker is live or lost is decided by the database's clock
(docs/design.md#rule-5), never stored: a stored flag would need the dead
worker to update it.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.db.models import Case, ExpressionWrapper, F, Func, Q, Value, When
from django.db.models.functions import Greatest, Least, Now

from django_jobretry.settings_schema import LIMITS

#: The longest lease a worker can have (LEASE_SECONDS' range, and ``runworker --lease``).
LONGEST_LEASE = timedelta(seconds=LIMITS["LEASE_SECONDS"].maximum)

#: Each row's lease as a worker could have written it: from 0 to LONGEST_LEASE. A
#: hand-written lease of a million years would take ``now() - lease`` out of
#: PostgreSQL's timestamp range, and the error would fail every page, command
#: and heartbeat that reads the table, for one bad row.
BOUNDED_LEASE = Least(
    Greatest(F("lease"), Value(timedelta(0))), Value(LONGEST_LEASE), output_field=models.DurationField()
)

#: A worker whose last heartbeat is older than its lease is lost: by then its
#: jobs' leases have run out too, and lease recovery may take them.
LIVE = Q(last_heartbeat_at__gte=ExpressionWrapper(Now() - BOUNDED_LEASE, output_field=models.DateTimeField()))


#: ``LIVE`` as a column: ``.annotate(live=IS_LIVE)``.
IS_LIVE = ExpressionWrapper(LIVE, output_field=models.BooleanField())

#: ``lease`` where Python can hold it as a timedelta, else NULL: psycopg refuses to
#: load a longer interval, and the whole row with it.
READABLE_LEASE = Case(
    When(lease__range=(timedelta.min, timedelta.max), then=F("lease")), output_field=models.DurationField()
)


class _StringArray(Func):
    """Whether a jsonb value is an array of strings (nothing nested, so Python always loads it)."""

    template = (
        "(jsonb_typeof(%(expressions)s) = 'array' AND NOT jsonb_path_exists("
        "%(expressions)s, 'strict $[*] ? (@.type() != \"string\")'))"
    )
    output_field = models.BooleanField()


#: ``queues`` when it is a list of queue names, else NULL. Any JSON fits the
#: column; a number cannot be listed and an array nested deeper than Python's
#: recursion limit cannot even be loaded.
READABLE_QUEUES = Case(When(_StringArray(F("queues")), then=F("queues")), output_field=models.JSONField())


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

    def __str__(self) -> str:
        return self.worker_id
