"""The rate limits' token buckets: one row per rate-limited task or queue.

Concurrency limits need no row of their own: a slot is a running job, so
a slot frees when its job leaves "running" by any fenced transition or by
lease recovery, and never twice. A rate needs memory between claims: how
many tokens were left, and when. The limited claim (jobs/statements.py)
refills and spends them under a lock, on the database clock.
"""

from __future__ import annotations

import math

from django.db import models

from django_jobretry.models.instants import holdable_times
from django_jobretry.models.job import LANE_MAX_LENGTH


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
