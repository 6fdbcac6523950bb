"""The ImportedFailure row: a failure of another system that an import has taken in.

``manage.py deadletters import-django-q2`` turns django-q2 ``Failure`` rows
into dead letters and leaves the ``Failure`` rows where they are. The dead
letter itself cannot say "this one was imported already": requeue and discard
delete it. So each imported task is remembered here, by (source, external
id), for good: a second run, or one after the dead letter was requeued or
discarded, imports it no more. The unique constraint is what makes two
imports running at once take each failure exactly once.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class ImportedFailure(models.Model):
    """One external task (django-q2: its task id) that an import has handled."""

    source = models.CharField(max_length=16)
    external_id = models.CharField(max_length=64)
    imported_at = models.DateTimeField(db_default=Now())

    class Meta:
        verbose_name = "imported failure"
        constraints = [
            models.UniqueConstraint(fields=["source", "external_id"], name="jobretry_imported_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.source}:{self.external_id}"
