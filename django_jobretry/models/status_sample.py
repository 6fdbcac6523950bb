"""What the console reads back over time: a status sample a minute, and the event counters.

- :class:`StatusSample`: how many jobs were ready, retrying, running and dead
  at one minute. The jobs and dead-letter tables hold only the state now;
  the dashboard's "retrying over time" needs a history. Running workers
  take one sample a minute, all of them together (console/trends.py):
  the minute is the primary key, so two workers cannot write the same minute
  twice. Each figure is counted like the dashboard's, up to ``count_limit``
  (COUNT_LIMIT when the sample was taken), one more meaning "more than
  that": a sample costs the same whatever the size of the tables, and says
  so when it stopped counting.
- :class:`EventCounter`: how many times something happened to one task on
  one queue, for metrics. Prometheus counters must count across every
  process (web processes enqueue, requeue and discard; workers on many hosts
  run jobs), survive restarts and never go down, so they live in the
  database. A counter is the sum of its rows: the row of shard 0 is the
  folded total; a row whose shard is NULL is a count appended from inside a
  caller's transaction and not folded yet (a row with another shard, a
  session's pid, was written before migration 0014 and is folded the same
  way). Why appended, how the rows are folded, and why the table stays
  small: console/counters.py and docs/design.md#counters.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q


def _within_limit(field: str, *, nullable: bool = False) -> Q:
    """0 <= field <= count_limit + 1 (the "more" value); NULL too if ``nullable``."""
    bounded = Q(**{f"{field}__gte": 0, f"{field}__lte": F("count_limit") + 1})
    return bounded | Q(**{f"{field}__isnull": True}) if nullable else bounded


class StatusSample(models.Model):
    """The job counts at one minute, as the dashboard would have shown them then."""

    #: The minute the sample stands for (the database clock, truncated to the minute).
    taken_at = models.DateTimeField(primary_key=True)
    #: The counting limit in force: a value of count_limit + 1 means "more than count_limit".
    count_limit = models.IntegerField()
    #: Ready jobs never attempted; NULL when more than count_limit were retrying (not counted).
    ready = models.IntegerField(null=True)
    #: Ready jobs waiting for another attempt after a failure.
    retrying = models.IntegerField()
    running = models.IntegerField()
    #: Dead letters kept.
    dead = models.IntegerField()

    class Meta:
        db_table = "jobretry_status_sample"
        verbose_name = "status sample"
        # Written only by workers; the dashboard reads it under view_deadletter.
        default_permissions = ()
        constraints = [
            models.CheckConstraint(condition=Q(count_limit__gte=1), name="jobretry_sample_limit_positive"),
            models.CheckConstraint(
                condition=_within_limit("ready", nullable=True), name="jobretry_sample_ready"
            ),
            *(
                models.CheckConstraint(condition=_within_limit(field), name=f"jobretry_sample_{field}")
                for field in ("retrying", "running", "dead")
            ),
        ]

    def __str__(self) -> str:
        return f"{self.taken_at:%Y-%m-%d %H:%M}: {self.retrying} retrying, {self.dead} dead"


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
