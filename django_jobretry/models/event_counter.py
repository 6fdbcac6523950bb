"""The EventCounter row: how many times something happened to one task on one queue, for metrics.

Prometheus counters must count across every process (web processes
enqueue, requeue and discard; workers on many hosts run jobs), survive
restarts and never go down, so they live in the database. A counter is the
sum of its rows: the row of shard 0 is the folded total; a row whose shard
is NULL is a count appended from inside a caller's transaction and not
folded yet (a row with another shard, a session's pid, was written
before migration 0014 and is folded the same way). Why appended, how the
rows are folded, and why the table stays small: console/counters.py and
docs/design.md#counters.
"""

from __future__ import annotations

from django.db import models


class CounterEvent(models.TextChoices):
    """What is counted; the metric is ``jobretry_jobs_<event>_total``."""

    ENQUEUED = "enqueued"
    STARTED = "started"
    SUCCEEDED = "succeeded"
    RETRIED = "retried"
    DEAD = "dead"
    REQUEUED = "requeued"
    DISCARDED = "discarded"


class EventCounter(models.Model):
    """Part of one counter: the events one shard has counted and not yet folded into shard 0."""

    event = models.CharField(max_length=16, choices=CounterEvent.choices)
    task_name = models.CharField(max_length=200)
    queue_name = models.CharField(max_length=100)
    #: 0: the folded total; NULL: an appended count, not folded yet. NULLs never
    #: collide in the unique key, so appending needs no upsert.
    shard = models.IntegerField(default=0, null=True)
    value = models.BigIntegerField(default=0)

    class Meta:
        db_table = "jobretry_counter"
        verbose_name = "event counter"
        # Nobody edits counters; reading them (the metrics view) is its own permission.
        default_permissions = ()
        permissions = [("view_metrics", "Can read the Prometheus metrics")]
        constraints = [
            # The key of the fold's upsert into shard 0 (ON CONFLICT names these columns).
            models.UniqueConstraint(
                fields=["event", "task_name", "queue_name", "shard"], name="jobretry_counter_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.task_name} {self.queue_name} [{self.shard}] = {self.value}"
