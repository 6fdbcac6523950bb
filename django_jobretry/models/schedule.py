"""The Schedule row: where one periodic schedule stands, shared by every worker on every host.

Declarations live in code and settings (schedules/__init__.py); this row is
their state in the database: the next slot no worker has decided yet, the
last run, and what became of the slots that did not run. Workers insert a
slot's run and move ``next_slot`` on in one transaction, holding this row's
lock (schedules/runs.py), so exactly one of them acts on each slot.
"""

from __future__ import annotations

from django.db import models

from django_jobretry.models.instants import holdable_times
from django_jobretry.models.job import ACTOR_MAX_LENGTH
from django_jobretry.policy.slots import DESCRIBED_MAX_LENGTH


class Schedule(models.Model):
    """One declared schedule's state: its next slot, its last run and its counts."""

    name = models.CharField(max_length=200, primary_key=True)
    task_name = models.CharField(max_length=200)
    #: The cadence in one line (policy.slots.Cadence.describe): when it changes, slots start over.
    cadence = models.CharField(max_length=DESCRIBED_MAX_LENGTH)
    #: The earliest slot not decided yet; due when the database clock passes it.
    next_slot = models.DateTimeField()
    last_slot = models.DateTimeField(null=True, blank=True)
    #: The job of the last run (a job id; the run may be a dead letter by now).
    last_job_id = models.BigIntegerField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    runs = models.BigIntegerField(default=0, help_text="Slots that ran.")
    #: Slots that did not run because a run was still live (overlap="skip").
    skipped = models.BigIntegerField(default=0)
    #: Slots dropped after downtime by the catch-up policy (collapsed, over the cap, or late).
    missed = models.BigIntegerField(default=0)
    #: Slots refused because the declaration could not make a job (its arguments no longer bind).
    refused = models.BigIntegerField(default=0)
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = models.CharField(max_length=ACTOR_MAX_LENGTH, blank=True, default="")
    pause_reason = models.CharField(max_length=500, blank=True, default="")
    #: When a worker declaring this schedule last started; an old time means it left the code.
    declared_at = models.DateTimeField()

    class Meta:
        ordering = ["name"]
        permissions = [
            ("pause_schedule", "Can pause and resume a schedule"),
            ("run_schedule", "Can run a schedule now"),
        ]
        indexes = [
            models.Index(
                fields=["next_slot"], name="jobretry_schedule_due", condition=models.Q(paused_at=None)
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(runs__gte=0, skipped__gte=0, missed__gte=0, refused__gte=0),
                name="jobretry_schedule_counts_pos",
            ),
            *holdable_times(
                "jobretry_schedule", "next_slot", "last_slot", "last_success_at", "paused_at", "declared_at"
            ),
        ]

    def __str__(self) -> str:
        return self.name
