"""The EventCounter row: how many times something happened to one task on one queue, for metrics.

Prometheus counters must count across every process (web processes
enqueue, requeue and discard; workers on many hosts run jobs), survive
restarts and never go down, so they live in the database. A counter is the
sum of its rows over ``shard``: shard 0 is the folded total; any other shard
is the backend pid (``pg_backend_pid()``) of the PostgreSQL session that
wrote it from inside a caller's transaction. Why the shards, how they are
written and folded, and why the table stays small: services/counters.py
and docs/design.md#counters.
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
    #: 0: the folded total; otherwise the pid of the database session that counted.
    shard = models.IntegerField(default=0)
    value = models.BigIntegerField(default=0)

    class Meta:
        db_table = "jobretry_counter"
        verbose_name = "event counter"
        # Nobody edits counters; reading them (the metrics view) is its own permission.
        default_permissions = ()
        permissions = [("view_metrics", "Can read the Prometheus metrics")]
        constraints = [
            # The key of every upsert (ON CONFLICT names these columns).
            models.UniqueConstraint(
                fields=["event", "task_name", "queue_name", "shard"], name="jobretry_counter_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.task_name} {self.queue_name} [{self.shard}] = {self.value}"
