"""The dead letters' tables: the DeadLetter row, and the rows that count, show and import dead letters.

- :class:`DeadLetter`: a job that will not be retried again, kept for an operator.
- :class:`Dashboard`: a proxy with no table of its own, the admin index's
  entry for the dashboard (a page of the dead-letter admin).
- :class:`Death`: one job that died, when, of what; the dashboard counts
  deaths from these. Dead letters are the wrong thing to count for "how many
  died in this hour": a requeue or a discard removes the row, so the count of
  an hour would fall although nothing came back to life. Each burial
  statement therefore also appends one row here, in the same statement
  (jobs/sql.py ``COUNT_DEATHS``): nothing to lock or to conflict on, so
  burials never wait for each other. The rows are kept as long as the status
  samples (trends.SAMPLES_KEPT, a week); the worker that takes a
  minute's sample deletes older ones in the same statement. Never edited,
  never shown by themselves: no arguments, no message, only what the counts
  group by.
- :class:`ImportedFailure`: a failure of another system that an import has
  taken in. ``manage.py deadletters import-django-q2`` turns django-q2
  ``Failure`` rows into dead letters and leaves the ``Failure`` rows where
  they are. The dead letter itself cannot say "this one was imported
  already": requeue and discard delete it. So each imported task is
  remembered here, by (source, external id), for good: a second run, or one
  after the dead letter was requeued or discarded, imports it no more. The
  unique constraint is what makes two imports running at once take each
  failure exactly once.

One module, because each of the three exists for the dead letters and reads
their reasons or sits in their admin.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now

from django_jobretry.models import fingerprints
from django_jobretry.models.fields import GinPathIndex, StoredJSONField, json_shapes
from django_jobretry.models.instants import holdable_times
from django_jobretry.models.job import LANE_MAX_LENGTH, provenance_index
from django_jobretry.models.job_results import ORIGIN_JOB_ID
from django_jobretry.models.progress import ProgressColumns, progress_counts


class DeadReason(models.TextChoices):
    """Why a job died; the policy's give-up reasons plus the worker's own."""

    FATAL = "fatal", "Fatal error"
    EXHAUSTED = "exhausted", "Attempts exhausted"
    DEADLINE = "deadline", "Deadline passed (retry_for, or its schedule's next slot)"
    LEASE_EXPIRED = "lease_expired", "Last attempt lost (lease expired)"
    CANCELLED = "cancelled", "Cancelled by an operator"
    SNOOZE_BUDGET = "snooze_budget", "Snoozed more often than its policy's max_snoozes"


class DeadLetterSource(models.TextChoices):
    """Which system ran the job that died: this package's workers, or a django-q2 cluster."""

    JOBRETRY = "jobretry", "django-jobretry"
    DJANGO_Q2 = "django_q2", "django-q2"


class DeadLetter(ProgressColumns):
    """Everything needed to understand and replay a job that died, and how far its last attempt got."""

    job_id = models.BigIntegerField(help_text="Id the job had in the jobs table.")
    task_name = models.CharField(max_length=200)
    queue_name = models.CharField(max_length=100)
    policy_name = models.CharField(max_length=64)
    priority = models.SmallIntegerField(default=0)
    args = StoredJSONField(default=list, blank=True)
    kwargs = StoredJSONField(default=dict, blank=True)
    reason = models.CharField(
        max_length=max(len(value) for value in DeadReason.values), choices=DeadReason.choices
    )
    attempts = models.PositiveIntegerField()
    max_attempts = models.PositiveIntegerField()
    errors = StoredJSONField(default=list, blank=True, help_text="The job's full attempt history.")
    last_error_class = models.CharField(max_length=200, blank=True, default="")
    last_error = models.TextField(blank=True, default="")
    # NULL, not "", for "no key": NULLs never collide in the unique index.
    unique_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    #: Carried from the job: how long its key stays taken after a requeued run succeeds.
    unique_for = models.DurationField(null=True, blank=True)
    #: Carried from the job: the enqueuer's trace context, which a requeued job's attempts link to.
    trace_context = StoredJSONField(null=True, blank=True)
    requeue_count = models.PositiveIntegerField(default=0)
    requeue_history = StoredJSONField(default=list, blank=True)
    enqueued_at = models.DateTimeField()
    #: Carried from the job: the start time its enqueue gave, which a requeue carries on.
    run_after = models.DateTimeField(null=True, blank=True)
    first_attempt_at = models.DateTimeField(null=True, blank=True)
    dead_at = models.DateTimeField(db_default=Now())
    # A db_default too: bury's INSERT ... SELECT (jobs/sql.py) does not name it.
    source = models.CharField(
        max_length=16,
        choices=DeadLetterSource.choices,
        default=DeadLetterSource.JOBRETRY,
        db_default=DeadLetterSource.JOBRETRY,
    )
    # Only for dead letters from another system (source != "jobretry"); job_id is 0 there.
    external_id = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    external_name = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    external_group = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    #: What replay needs, as the other system signed it (django-q2: its SignedPackage).
    external_payload = models.TextField(null=True, blank=True)  # noqa: DJ001
    #: The schedule and slot of a periodic run that died (NULL for every other dead letter).
    schedule_name = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    schedule_slot = models.DateTimeField(null=True, blank=True)
    #: The lane of the job (limits/__init__.py), carried back by a requeue; NULL: not limited.
    limit_lane = models.CharField(max_length=LANE_MAX_LENGTH, null=True, blank=True)  # noqa: DJ001
    #: Its workflow step (models/flow.py), carried back by a requeue: the dead letter blocks that flow.
    #: No constraint in the database: its check would queue a trigger event on every insert of the table.
    flow_step = models.ForeignKey(
        "FlowStep",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_index=False,
        db_constraint=False,
        related_name="+",
    )
    #: Its failure group, set by the database on every insert (models/fingerprints.py).
    fingerprint = fingerprints.FingerprintField()

    class Meta:
        verbose_name = "dead letter"
        permissions = [
            ("requeue_deadletter", "Can requeue dead letters"),
            ("discard_deadletter", "Can discard dead letters"),
            ("repair_deadletter", "Can repair a dead letter's arguments and requeue it"),
        ]
        indexes = [
            # Listing: newest dead first, keyset-paginated on (dead_at, id).
            models.Index(models.F("dead_at").desc(), models.F("id").desc(), name="jobretry_dead_newest"),
            # The same order within one queue, task or reason: a filter that
            # matches few rows must not scan the table (admin, command, API).
            *(
                models.Index(
                    field, models.F("dead_at").desc(), models.F("id").desc(), name=f"jobretry_dead_{short}"
                )
                for field, short in (
                    ("queue_name", "queue"),
                    ("task_name", "task"),
                    ("reason", "reason"),
                    ("source", "source"),
                )
            ),
            # Failure groups (deadletters/search.py): GROUP BY fingerprint, task, reason
            # from the index alone, already in order; a group's rows by its fingerprint.
            models.Index(
                fields=["fingerprint", "task_name", "reason", "dead_at"], name="jobretry_dead_fingerprint"
            ),
            # Search by arguments (deadletters/search.py): args @> [...], kwargs @> {...}.
            GinPathIndex(field="args", name="jobretry_dead_args"),
            GinPathIndex(field="kwargs", name="jobretry_dead_kwargs"),
            # A task result by id: the dead job's own id, or its first job id once requeued.
            models.Index(fields=["job_id"], name="jobretry_dead_job"),
            models.Index(ORIGIN_JOB_ID, name="jobretry_dead_origin", condition=models.Q(requeue_count__gt=0)),
            # Which dead letter carries an earlier dead letter's or job's id (admin/audit.py).
            provenance_index("jobretry_dead_provenance"),
            models.Index(
                fields=["flow_step"],
                name="jobretry_dead_flow_step",
                condition=models.Q(flow_step__isnull=False),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(reason__in=DeadReason.values), name="jobretry_dead_reason_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(source__in=DeadLetterSource.values), name="jobretry_dead_source_valid"
            ),
            # What a reader can load, as on the jobs table.
            *holdable_times(
                "jobretry_dead",
                *("enqueued_at", "run_after", "first_attempt_at", "dead_at", "schedule_slot", "progress_at"),
            ),
            progress_counts("jobretry_dead"),
            *json_shapes(
                "jobretry_dead", args="array", kwargs="object", errors="array", requeue_history="array"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_name}#{self.job_id} dead ({self.reason})"


class Dashboard(DeadLetter):
    """No table of its own: the admin index's and sidebar's entry for the dashboard (admin/dashboard.py).

    The admin lists models only, so the dashboard, a page of the dead-letter
    admin, is reachable from the index through this proxy, whose list
    redirects there.
    """

    class Meta:
        proxy = True
        verbose_name = "dashboard"
        verbose_name_plural = "dashboard: what is dying"
        # Seeing it is seeing dead letters (view_deadletter).
        default_permissions = ()


class Death(models.Model):
    """A job that became a dead letter: when, which task on which queue, why, of which error class."""

    id = models.BigAutoField(primary_key=True)
    died_at = models.DateTimeField(db_default=Now())
    task_name = models.CharField(max_length=200)
    queue_name = models.CharField(max_length=100)
    reason = models.CharField(max_length=max(len(value) for value in DeadReason.values))
    #: The last error's class; "" for a death without an exception (lease lost, cancelled).
    error_class = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        db_table = "jobretry_death"
        verbose_name = "death"
        # Written only by the burial statements; the dashboard reads it under view_deadletter.
        default_permissions = ()
        indexes = [
            # Per hour and per day (the charts), and pruning: one range of this index each.
            models.Index(fields=["died_at"], name="jobretry_death_at"),
            # Per task and per error class: a skip scan finds the names, a range counts each.
            models.Index(fields=["task_name", "died_at"], name="jobretry_death_task"),
            models.Index(fields=["error_class", "died_at"], name="jobretry_death_error"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(reason__in=DeadReason.values), name="jobretry_death_reason_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_name} died {self.died_at:%Y-%m-%d %H:%M:%S} ({self.reason})"


class ImportedFailure(models.Model):
    """One external task (django-q2: its task id) that an import has handled."""

    source = models.CharField(max_length=16)
    external_id = models.CharField(max_length=64)
    imported_at = models.DateTimeField(db_default=Now())

    class Meta:
        verbose_name = "imported failure"
        constraints = [
            models.UniqueConstraint(fields=["source", "external_id"], name="jobretry_imported_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.source}:{self.external_id}"
