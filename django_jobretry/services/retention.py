"""Retention: finished jobs do not pile up forever."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db.models import DurationField, Value
from django.db.models.functions import Now

from django_jobretry.models import Job, JobStatus

logger = logging.getLogger("django_jobretry")


def prune_succeeded(older_than: timedelta, *, dry_run: bool = False) -> int:
    """Delete succeeded jobs finished before now() - older_than (database clock)."""
    cutoff = Now() - Value(older_than, output_field=DurationField())
    old = Job.objects.filter(status=JobStatus.SUCCEEDED, finished_at__lt=cutoff)
    if dry_run:
        return old.count()
    count, _ = old.delete()
    logger.info("pruned %d succeeded jobs", count, extra={"outcome": "pruned", "count": count})
    return count
