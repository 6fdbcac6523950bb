"""A workflow's rows: the flow, its steps and the edges between them (docs/workflows.md).

A step is an ordinary job plus its place in a flow. The job row carries
``flow_step`` and moves between the tables as any job does (a burial copies
it to the dead letter, a requeue back to a new job), so the step, not the job
id, is what the edges join: a requeue makes a new job id (decision 0005) and
the flow does not notice. A step waiting for its parents is a job in status
"waiting", outside the claim's partial indexes; the transaction that records
its last parent's success makes it ready (jobs/functions.sql,
``jobretry_flow_release``). The step's ``state`` is the flow's view of it,
kept by the same functions in the same transactions as its job's changes.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now

from django_jobretry.models.instants import holdable_times
from django_jobretry.models.job import ACTOR_MAX_LENGTH

#: Longest name of a flow or of a step.
FLOW_NAME_MAX_LENGTH = 200


class FlowState(models.TextChoices):
    """Where a flow stands; "blocked" while one of its steps is a dead letter."""

    RUNNING = "running", "Running"
    BLOCKED = "blocked", "Blocked by a dead letter"
    COMPLETED = "completed", "Completed"
    CANCELLED = "cancelled", "Cancelled"


class StepState(models.TextChoices):
    """A step's state in its flow: waiting for parents, live as a job, or ended."""

    WAITING = "waiting", "Waiting for its parents"
    LIVE = "live", "Ready or running"
    SUCCEEDED = "succeeded", "Succeeded"
    DEAD = "dead", "Dead letter"
    CANCELLED = "cancelled", "Cancelled"
    DISCARDED = "discarded", "Discarded"


class StepRole(models.TextChoices):
    """An ordinary step, or one of the flow's callbacks (steps too, with edges from every step)."""

    STEP = "step", "Step"
    ON_SUCCESS = "on_success", "On success"
    ON_COMPLETE = "on_complete", "On completion"
    ON_DEATH = "on_death", "On death"


class OnDead(models.TextChoices):
    """What an edge does when its parent becomes a dead letter (a cancel or a discard: see docs)."""

    BLOCK = "block", "Wait for the dead letter's requeue"
    RUN = "run", "Run anyway"
    SKIP = "skip", "Skip (cancel) the child"


class Flow(models.Model):
    """One workflow: its steps' counts and where it stands."""

    name = models.CharField(max_length=FLOW_NAME_MAX_LENGTH)
    state = models.CharField(
        max_length=max(len(value) for value in FlowState.values),
        choices=FlowState.choices,
        default=FlowState.RUNNING,
    )
    #: Every step, callbacks included.
    steps = models.PositiveIntegerField()
    #: Steps (callbacks but on-death included) not yet succeeded, cancelled or discarded: 0 completes it.
    open_steps = models.PositiveIntegerField()
    #: The first of its dead letters still there (a requeue or a discard moves it on); NULL: none.
    blocked_by = models.BigIntegerField(null=True, blank=True)
    blocked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now())
    finished_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.CharField(max_length=ACTOR_MAX_LENGTH, blank=True, default="")

    class Meta:
        permissions = [("cancel_flow", "Can cancel flows")]
        indexes = [
            models.Index(fields=["state", "created_at"], name="jobretry_flow_state"),
            # The flow a new dead letter blocks, for its signal (flows/events.py).
            models.Index(
                fields=["blocked_by"],
                name="jobretry_flow_blocked",
                condition=models.Q(blocked_by__isnull=False),
            ),
            models.Index(
                fields=["finished_at"],
                name="jobretry_flow_finished",
                condition=models.Q(finished_at__isnull=False),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=FlowState.values), name="jobretry_flow_state_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(open_steps__lte=models.F("steps")), name="jobretry_flow_open_le_steps"
            ),
            *holdable_times("jobretry_flow", "blocked_at", "created_at", "finished_at"),
        ]

    def __str__(self) -> str:
        return f"{self.name} #{self.pk} ({self.state})"


class FlowStep(models.Model):
    """One step of a flow: its job (by ``Job.flow_step``), its state and how many parents it waits on."""

    flow = models.ForeignKey(Flow, on_delete=models.CASCADE, related_name="step_rows")
    name = models.CharField(max_length=FLOW_NAME_MAX_LENGTH)
    role = models.CharField(
        max_length=max(len(value) for value in StepRole.values),
        choices=StepRole.choices,
        default=StepRole.STEP,
    )
    task_name = models.CharField(max_length=200)
    state = models.CharField(
        max_length=max(len(value) for value in StepState.values), choices=StepState.choices
    )
    #: Parents whose edge is not yet satisfied; the step is made ready when it reaches 0.
    waiting_on = models.PositiveIntegerField(default=0)
    #: Its parents must keep their results (JSON, capped): it reads them with ``parent_results()``.
    reads_results = models.BooleanField(default=False)
    #: Its return value is kept as JSON: a child reads it.
    keeps_result = models.BooleanField(default=False)
    #: While it is a dead letter: which one.
    dead_letter_id = models.BigIntegerField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["flow", "name"], name="jobretry_flowstep_unique_name"),
            models.CheckConstraint(
                condition=models.Q(state__in=StepState.values), name="jobretry_flowstep_state_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(role__in=StepRole.values), name="jobretry_flowstep_role_valid"
            ),
            *holdable_times("jobretry_flowstep", "ended_at"),
        ]
        indexes = [
            # A flow's dead letters: which one blocks it (jobs/functions.sql, jobretry_flow_settle).
            models.Index(
                fields=["flow", "dead_letter_id"],
                name="jobretry_flowstep_dead",
                condition=models.Q(dead_letter_id__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.state})"


class FlowEdge(models.Model):
    """``child`` waits for ``parent``; ``satisfied`` once the parent's end counted for it (once)."""

    parent = models.ForeignKey(FlowStep, on_delete=models.CASCADE, related_name="child_edges")
    child = models.ForeignKey(FlowStep, on_delete=models.CASCADE, related_name="parent_edges")
    on_dead = models.CharField(
        max_length=max(len(value) for value in OnDead.values), choices=OnDead.choices, default=OnDead.BLOCK
    )
    satisfied = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["parent", "child"], name="jobretry_flowedge_unique"),
            models.CheckConstraint(
                condition=~models.Q(parent=models.F("child")), name="jobretry_flowedge_not_self"
            ),
            models.CheckConstraint(
                condition=models.Q(on_dead__in=OnDead.values), name="jobretry_flowedge_on_dead_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.parent_id} -> {self.child_id} ({self.on_dead})"
