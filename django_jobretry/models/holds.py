"""What holds jobs back from the claim: an operator's pause, a task's breaker, and the rate limits' buckets.

Pauses and breakers are rows the claim statement reads (jobs/statements.py),
so a pause or an open breaker applies to every worker on every host at its
next claim, with no cache to go stale. A held job stays ready and keeps its
attempts; the time it was held is added to its ``held_seconds`` when it is
released, so its ``retry_for`` clock does not run meanwhile.

The rate limits' token buckets are one row per rate-limited task or queue.
Concurrency limits need no row of their own: a slot is a running job, so a
slot frees when its job leaves "running" by any fenced transition or by
lease recovery, and never twice. A rate needs memory between claims: how
many tokens were left, and when. The limited claim (jobs/statements.py)
refills and spends them under a lock, on the database clock.
"""

from __future__ import annotations

import math

from django.db import models
from django.db.models.functions import Now

from django_jobretry.models.instants import holdable_times
from django_jobretry.models.job import ACTOR_MAX_LENGTH, LANE_MAX_LENGTH
from django_jobretry.policy.errors import MAX_DELAY

#: Longest reason an operator may give for a pause.
REASON_MAX_LENGTH = 500
#: The longest cooldown a breaker row holds, in seconds: the longest delay a policy or a
#: ``CircuitOpen`` accepts. Past it, ``now + cooldown`` would leave the times the columns hold.
MAX_COOLDOWN_SECONDS = MAX_DELAY.total_seconds()


class Pause(models.Model):
    """A queue or a task paused by an operator: none of its jobs is claimed until it is resumed."""

    #: The paused queue, or NULL when a task is paused (exactly one of the two is set).
    queue_name = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    task_name = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    paused_by = models.CharField(max_length=ACTOR_MAX_LENGTH)
    reason = models.CharField(max_length=REASON_MAX_LENGTH, blank=True, db_default="")
    paused_at = models.DateTimeField(db_default=Now())
    #: The pause ends by itself at this time; NULL: only a resume ends it.
    until = models.DateTimeField(null=True, blank=True)

    class Meta:
        permissions = [("pause_work", "Can pause and resume queues and tasks")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(queue_name__isnull=True) ^ models.Q(task_name__isnull=True),
                name="jobretry_pause_one_target",
            ),
            models.UniqueConstraint(
                fields=["queue_name"],
                condition=models.Q(queue_name__isnull=False),
                name="jobretry_pause_queue",
            ),
            models.UniqueConstraint(
                fields=["task_name"], condition=models.Q(task_name__isnull=False), name="jobretry_pause_task"
            ),
            *holdable_times("jobretry_pause", "paused_at", "until"),
        ]

    def __str__(self) -> str:
        return f"queue {self.queue_name}" if self.queue_name is not None else f"task {self.task_name}"


class CircuitState(models.TextChoices):
    """A breaker's states: closed runs the task, open holds it, half-open runs one probe."""

    CLOSED = "closed", "Closed"
    OPEN = "open", "Open"
    HALF_OPEN = "half_open", "Half-open (one probe runs)"


class Circuit(models.Model):
    """One task's breaker: its failure count in the current window and, once open, until when."""

    task_name = models.CharField(max_length=200, primary_key=True)
    state = models.CharField(
        max_length=max(len(value) for value in CircuitState.values),
        choices=CircuitState.choices,
        db_default=CircuitState.CLOSED,
    )
    #: Counted failures since ``window_started_at``.
    failures = models.PositiveIntegerField(db_default=0)
    window_started_at = models.DateTimeField(null=True, blank=True)
    #: When the breaker opened after being closed: the start of the hold.
    opened_at = models.DateTimeField(null=True, blank=True)
    #: The end of the cooldown; then one probe is let through.
    open_until = models.DateTimeField(null=True, blank=True)
    #: Openings in a row without a successful probe: the cooldown doubles with each.
    opens = models.PositiveIntegerField(db_default=0)
    #: The cooldown of the current opening, and the longest a reopening may have, in seconds.
    cooldown_seconds = models.FloatField(db_default=0)
    max_cooldown_seconds = models.FloatField(db_default=0)
    #: How many held jobs a second are let go once a probe succeeded.
    release_per_second = models.FloatField(db_default=10)
    #: The one job the claim lets through while half-open, and its attempts when it was chosen.
    probe_job_id = models.BigIntegerField(null=True, blank=True)
    probe_attempts = models.PositiveIntegerField(null=True, blank=True)
    #: Why it opened last: the count that tripped it, or the job that raised CircuitOpen.
    reason = models.CharField(max_length=REASON_MAX_LENGTH, blank=True, db_default="")
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        # One name across the admin, the docs and the commands (issue 36).
        verbose_name = "circuit breaker"
        verbose_name_plural = "circuit breakers"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=CircuitState.values), name="jobretry_circuit_state"
            ),
            models.CheckConstraint(
                condition=models.Q(state=CircuitState.CLOSED)
                | models.Q(opened_at__isnull=False, open_until__isnull=False),
                name="jobretry_circuit_open_times",
            ),
            models.CheckConstraint(
                condition=~models.Q(state=CircuitState.HALF_OPEN) | models.Q(probe_job_id__isnull=False),
                name="jobretry_circuit_probe",
            ),
            *holdable_times("jobretry_circuit", "window_started_at", "opened_at", "open_until", "updated_at"),
            # What Python computes with: 1 / rate spaces the release, now + cooldown ends an opening.
            models.CheckConstraint(
                condition=models.Q(release_per_second__gt=0, release_per_second__lt=math.inf),
                name="jobretry_circuit_release_rate",
            ),
            models.CheckConstraint(
                condition=models.Q(
                    cooldown_seconds__gte=0,
                    cooldown_seconds__lte=MAX_COOLDOWN_SECONDS,
                    max_cooldown_seconds__gte=0,
                    max_cooldown_seconds__lte=MAX_COOLDOWN_SECONDS,
                ),
                name="jobretry_circuit_cooldowns",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_name} ({self.state})"


class RateBucket(models.Model):
    """The tokens of one rate limit ("task:<name>" or "queue:<name>") as of ``refilled_at``."""

    name = models.CharField(max_length=LANE_MAX_LENGTH, primary_key=True)
    tokens = models.FloatField()
    refilled_at = models.DateTimeField()

    class Meta:
        verbose_name = "rate bucket"
        constraints = [
            models.CheckConstraint(condition=models.Q(tokens__gte=0), name="jobretry_bucket_tokens_pos"),
            # NaN passes ">= 0" in PostgreSQL (it sorts above every number): this one refuses it.
            models.CheckConstraint(
                condition=models.Q(tokens__lt=math.inf), name="jobretry_bucket_tokens_finite"
            ),
            *holdable_times("jobretry_bucket", "refilled_at"),
        ]

    def __str__(self) -> str:
        return f"{self.name}: {self.tokens:.2f} tokens"
