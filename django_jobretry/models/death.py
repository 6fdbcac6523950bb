"""The Death row: one job that died, when, of what; the dashboard counts deaths from these.

Dead letters are the wrong thing to count for "how many died in this hour":
a requeue or a discard removes the row, so the count of an hour would fall
although nothing came back to life. Each burial statement therefore also
appends one row here, in the same statement (jobs/sql.py
``COUNT_DEATHS``): nothing to lock or to conflict on, so burials never wait
for each other. The rows are kept as long as the status samples
(status_samples.SAMPLES_KEPT, a week); the worker that takes a minute's
sample deletes older ones in the same statement. Never edited, never shown
by themselves: no arguments, no message, only what the counts group by.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now

from django_jobretry.models.dead_letter import DeadReason


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
