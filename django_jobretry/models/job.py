"""The Job row: one unit of work from enqueue until it succeeds or dies."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import models
from django.db.models.functions import Now

from django_jobretry.exceptions import NoResult
from django_jobretry.models.fields import GinPathIndex, StoredJSONField, json_shapes
from django_jobretry.models.instants import holdable_times
from django_jobretry.models.job_results import ORIGIN_JOB_ID, first_job_id, job_result
from django_jobretry.models.job_states import JobSubStates
from django_jobretry.models.progress import ProgressColumns, progress_counts
from django_jobretry.validation import PRIORITY_MAX, PRIORITY_MIN


def provenance_index(name: str) -> GinPathIndex:
    """The rows whose requeue history names a dead letter or job id: ``requeue_history @> [{...}]``.

    A row's id changes as it moves between the tables (requeued, dead again);
    the admin follows an old link to what the row became (admin/audit.py).
    Partial on requeue_count > 0: only requeued rows have a history to index.
    """
    return GinPathIndex(field="requeue_history", condition=models.Q(requeue_count__gt=0), name=name)


class JobStatus(models.TextChoices):
    """Live states. A job that dies leaves this table for DeadLetter."""

    READY = "ready", "Ready"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    #: A workflow's step whose parents have not all succeeded: out of the claim's indexes (models/flow.py).
    WAITING = "waiting", "Waiting for its parents"


#: States of a job that may still run: what unique_key deduplicates against (a workflow's waiting
#: step holds its key from its flow's enqueue).
LIVE_STATUSES = (JobStatus.READY, JobStatus.RUNNING, JobStatus.WAITING)
#: A succeeded job still inside its own ``unique_for``: enqueues with that window find it, so
#: retention keeps it (jobs/retention.py).
KEEPS_KEY = models.Q(
    status=JobStatus.SUCCEEDED, unique_for__isnull=False, finished_at__gt=Now() - models.F("unique_for")
)
#: Ready again after a failed attempt: waiting for a retry. ``Job.objects.retrying()``,
#: and the admin's "retrying" status filter, whose querysets need not be JobQuerySets.
RETRYING = models.Q(status=JobStatus.READY, attempts__gt=0)
#: Longest name of who cancelled a running job that is recorded (longer ones are cut where
#: they enter the cancel service; ``canceljobs --actor`` refuses them).
ACTOR_MAX_LENGTH = 150
#: Longest limit lane: "key:" or "queue:" and a concurrency key (policy/limits.py MAX_KEY_CHARS) or a name.
LANE_MAX_LENGTH = 210


class JobQuerySet(JobSubStates["Job"]):
    """Named states, so "what counts as live" is written once; sub-states in models/job_states.py."""

    def live(self) -> JobQuerySet:
        """Ready, running or waiting (a workflow's step): not finished, not dead."""
        return self.filter(status__in=LIVE_STATUSES)

    def holding_key(self, key: str, window: timedelta | None = None) -> JobQuerySet:
        """The jobs holding unique_key ``key`` for an enqueue: the live one, and with a ``window``
        (its ``unique_for``) the ones that succeeded less than that long ago, by the database clock."""
        holds = models.Q(status__in=LIVE_STATUSES)
        if window is not None:
            holds |= models.Q(status=JobStatus.SUCCEEDED, finished_at__gt=Now() - window)
        return self.filter(holds, unique_key=key)

    def ready(self) -> JobQuerySet:
        """Waiting to be claimed, now or at ``run_at``."""
        return self.filter(status=JobStatus.READY)

    def retrying(self) -> JobQuerySet:
        """Ready again after a failed attempt: waiting for a retry."""
        return self.filter(RETRYING)


class Job(ProgressColumns):
    """A job; its state changes only in jobs/statements.py. Its progress: models/progress.py."""

    task_name = models.CharField(max_length=200)
    queue_name = models.CharField(max_length=100, default="default")
    policy_name = models.CharField(max_length=64, default="default")
    status = models.CharField(
        max_length=max(len(value) for value in JobStatus.values),
        choices=JobStatus.choices,
        default=JobStatus.READY,
    )
    args = StoredJSONField(default=list, blank=True)
    kwargs = StoredJSONField(default=dict, blank=True)
    priority = models.SmallIntegerField(default=0, help_text="Higher runs first; -100 to 100.")
    run_at = models.DateTimeField(db_default=Now(), help_text="Not claimed before this time.")
    #: The start time its enqueue gave (``run_after``), kept while retries and holds move ``run_at``;
    #: NULL: none given. A requeue carries it: django.tasks reports it as the task's ``run_after``.
    run_after = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0, help_text="Counted when a worker claims the job.")
    max_attempts = models.PositiveIntegerField(help_text="Copied from the policy at enqueue.")
    # NULL, not "", for "no key": NULLs never collide in the unique index.
    unique_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    #: How long unique_key stays taken after the job succeeded (``unique_for``); NULL: only while live.
    unique_for = models.DurationField(null=True, blank=True)
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_token = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    errors = StoredJSONField(default=list, blank=True, help_text="One entry per ended attempt, bounded.")
    requeue_count = models.PositiveIntegerField(default=0)
    requeue_history = StoredJSONField(default=list, blank=True)
    enqueued_at = models.DateTimeField(db_default=Now())
    first_attempt_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    #: Set by an operator's cancel of a running job; its worker stops it at its next heartbeat.
    cancel_requested_by = models.CharField(max_length=ACTOR_MAX_LENGTH, blank=True, db_default="")
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    #: What the function returned, as JSON: a django.tasks task's, an ``@job(keep_result=True)``'s
    #: (or its policy's) and a workflow step's; NULL: none kept (``Job.result()``, docs/results.md).
    return_value = StoredJSONField(null=True, blank=True)
    #: A run of a periodic schedule: its name and slot (NULL for every other job).
    schedule_name = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    schedule_slot = models.DateTimeField(null=True, blank=True)
    #: A schedule's run retries only until its schedule's next slot (docs/schedules.md#retries).
    retry_until = models.DateTimeField(null=True, blank=True)
    #: Times this job snoozed (``raise Snooze``): each gave its attempt back; bounded by ``max_snoozes``.
    snoozes = models.PositiveIntegerField(db_default=0)
    #: The delays of those snoozes added up, in seconds: bounded by the policy's ``snooze_for``.
    snoozed_seconds = models.FloatField(db_default=0)
    #: Times this job was chosen as its task's breaker's probe: the least chosen is chosen next.
    probes = models.PositiveIntegerField(db_default=0)
    #: Seconds this job was due but held by a pause, a breaker or a limit: not counted against ``retry_for``.
    held_seconds = models.FloatField(db_default=0)
    #: The enqueuer's trace context (W3C ``traceparent``/``tracestate``), with OpenTelemetry installed
    #: and a span active at enqueue (jobs/tracing.py); each attempt's span links to it.
    trace_context = StoredJSONField(null=True, blank=True)
    #: A limited job's lane (limits/__init__.py): the limited claim serves lanes in turn; NULL: not limited.
    limit_lane = models.CharField(max_length=LANE_MAX_LENGTH, null=True, blank=True)  # noqa: DJ001
    #: Its step when the job is part of a workflow; NULL for every other job (indexed only when set).
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

    #: Not a column: set on the job an enqueue returns. True when its unique key was already held
    #: and the enqueue returned the holding job (``on_conflict``) instead of inserting one; False on
    #: a new job and on any job loaded from the database (docs/jobs.md#deduplication).
    deduplicated: bool = False

    objects = JobQuerySet.as_manager()

    class Meta:
        verbose_name = "job"
        # Arguments may hold personal data: seeing them is a separate right.
        permissions = [
            ("view_job_payload", "Can view job and dead-letter arguments"),
            ("cancel_job", "Can cancel jobs"),
        ]
        indexes = [
            # The claim query: WHERE status = 'ready' AND run_at <= now()
            # ORDER BY priority DESC, run_at, id. Same column order as ORDER BY.
            models.Index(
                models.F("priority").desc(),
                "run_at",
                "id",
                name="jobretry_job_claim",
                condition=models.Q(status="ready"),
            ),
            # The same for workers started with --queue: without queue_name in
            # front, a rare queue with a backlog is found by scan and sort.
            models.Index(
                "queue_name",
                models.F("priority").desc(),
                "run_at",
                "id",
                name="jobretry_job_claim_queue",
                condition=models.Q(status="ready"),
            ),
            # Lease recovery: WHERE status = 'running' AND lease_expires_at < now().
            models.Index(
                fields=["lease_expires_at"],
                name="jobretry_job_lease",
                condition=models.Q(status="running"),
            ),
            # Jobs waiting for a retry, per queue (the dashboard, `manage.py jobstatus`, the
            # admin's retrying filter): few rows, so counting them never walks the backlog.
            models.Index(
                fields=["queue_name", "run_at"],
                name="jobretry_job_retrying",
                condition=models.Q(status="ready", attempts__gt=0),
            ),
            # A task result by id: a requeued job is found by its first job id (docs/django-tasks.md).
            models.Index(
                ORIGIN_JOB_ID,
                name="jobretry_job_origin",
                condition=models.Q(requeue_count__gt=0),
            ),
            provenance_index("jobretry_job_provenance"),
            # Search by arguments among retrying jobs (deadletters/search.py): partial, so
            # enqueue, the claim and a success write nothing to them; only a retry does.
            GinPathIndex(field="args", name="jobretry_job_retrying_args", condition=RETRYING),
            GinPathIndex(field="kwargs", name="jobretry_job_retrying_kwargs", condition=RETRYING),
            # The limited claim's walk (jobs/statements.py): lane by lane, each in claim order.
            models.Index(
                "limit_lane",
                models.F("priority").desc(),
                "run_at",
                "id",
                name="jobretry_job_lane",
                condition=models.Q(status="ready", limit_lane__isnull=False),
            ),
            # Keyed jobs that succeeded, by key and end: an enqueue's unique_for window
            # (jobs/enqueue.py) and a requeue's look for a recent one.
            models.Index(
                fields=["unique_key", "finished_at"],
                name="jobretry_job_unique_window",
                condition=models.Q(status="succeeded", unique_key__isnull=False),
            ),
            models.Index(
                fields=["flow_step"],
                name="jobretry_job_flow_step",
                condition=models.Q(flow_step__isnull=False),
            ),
            # Pruning finished jobs by age.
            models.Index(
                fields=["finished_at"],
                name="jobretry_job_finished",
                condition=models.Q(status="succeeded"),
            ),
        ]
        constraints = [
            # One run per slot of a schedule, whichever worker inserts it (schedules/runs.py).
            models.UniqueConstraint(
                fields=["schedule_name", "schedule_slot"],
                condition=models.Q(schedule_name__isnull=False),
                name="jobretry_job_one_run_per_slot",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=JobStatus.values), name="jobretry_job_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(max_attempts__gte=1), name="jobretry_job_max_attempts_pos"
            ),
            models.CheckConstraint(
                condition=models.Q(attempts__lte=models.F("max_attempts")),
                name="jobretry_job_attempts_le_max",
            ),
            models.CheckConstraint(
                condition=models.Q(priority__gte=PRIORITY_MIN, priority__lte=PRIORITY_MAX),
                name="jobretry_job_priority_range",
            ),
            # A running job always has a live lease; nothing else has one.
            models.CheckConstraint(
                condition=(
                    models.Q(status="running", lease_token__isnull=False, lease_expires_at__isnull=False)
                    | (~models.Q(status="running") & models.Q(lease_token__isnull=True))
                ),
                name="jobretry_job_lease_iff_running",
            ),
            # Only a running job can be waiting for its worker to stop it.
            models.CheckConstraint(
                condition=models.Q(status="running") | models.Q(cancel_requested_at__isnull=True),
                name="jobretry_job_cancel_only_running",
            ),
            # A ready job can still run: one with no attempts left would wait forever.
            models.CheckConstraint(
                condition=~models.Q(status="ready") | models.Q(attempts__lt=models.F("max_attempts")),
                name="jobretry_job_ready_has_attempts_left",
            ),
            models.CheckConstraint(
                condition=models.Q(held_seconds__gte=0), name="jobretry_job_held_seconds_pos"
            ),
            models.CheckConstraint(
                condition=~models.Q(status="succeeded") | models.Q(finished_at__isnull=False),
                name="jobretry_job_finished_when_succeeded",
            ),
            # At most one live (ready or running) job per unique_key. Jobs without
            # a key are left out: they never conflict, and leaving them out spares
            # every enqueue an index insert.
            models.UniqueConstraint(
                fields=["unique_key"],
                condition=models.Q(status__in=LIVE_STATUSES, unique_key__isnull=False),
                name="jobretry_job_unique_live_key",
            ),
            models.CheckConstraint(
                condition=models.Q(unique_for__isnull=True)
                | models.Q(unique_key__isnull=False, unique_for__gt=timedelta(0)),
                name="jobretry_job_unique_for_has_key",
            ),
            # What a reader can load: times Python holds, arguments and histories of the right shape.
            *holdable_times(
                "jobretry_job",
                "run_at",
                "run_after",
                "lease_expires_at",
                "enqueued_at",
                "first_attempt_at",
                "started_at",
                "finished_at",
                "cancel_requested_at",
                "schedule_slot",
                "retry_until",
                "progress_at",
            ),
            progress_counts("jobretry_job"),
            *json_shapes(
                "jobretry_job", args="array", kwargs="object", errors="array", requeue_history="array"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_name}#{self.pk} ({self.status})"

    def result(self) -> Any:
        """What this job returned, as kept, read from the database now: after a requeue, from the job it
        became (models/job_results.py). ResultNotReady until it succeeds; NoResult if it keeps none."""
        if self.pk is None:
            raise NoResult("an unsaved job has no result: enqueue it")
        return job_result(first_job_id(self.pk, self.requeue_history))
