"""Admin log (LogEntry) rows for operator actions.

Every requeue and discard is an operator decision someone may have to
explain later, so each one leaves a LogEntry (docs/design.md#dead-letters). Django's
``log_actions`` gives every object of a bulk call the same message; ours
say which job each dead letter became, so the rows are built here and
inserted in one statement whatever the version (Django 5.2 to 6.1).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.http import HttpRequest

from django_jobretry.models import DeadLetter, Job
from django_jobretry.services.resubmitters import Resubmitted

#: One row to log: the object, its action flag and a message in plain words.
Row = tuple[models.Model, int, str]


def log(request: HttpRequest, rows: Iterable[Row]) -> None:
    """Insert one LogEntry per row, attributed to the requesting user."""
    # Only logged-in staff reach the admin views, so there is always a user id.
    user_id = cast(int, request.user.pk)
    entries = [
        LogEntry(
            user_id=user_id,
            content_type_id=ContentType.objects.get_for_model(obj, for_concrete_model=False).pk,
            object_id=str(obj.pk),
            object_repr=str(obj)[:200],
            action_flag=flag,
            change_message=message,
        )
        for obj, flag, message in rows
    ]
    if entries:
        LogEntry.objects.bulk_create(entries)


def requeued(dead: DeadLetter, job: Job | Resubmitted) -> list[Row]:
    """A requeue ends the dead letter and starts a job: both sides are logged."""
    if isinstance(job, Resubmitted):  # the new task is another system's, not one of our rows
        return [(dead, DELETION, f"Requeued as {job.source} task {job.pk}.")]
    return [
        (dead, DELETION, f"Requeued as job {job.pk}."),
        (job, ADDITION, f"Requeued from dead letter {dead.pk} (job {dead.job_id}, {dead.reason})."),
    ]


def discarded(dead: DeadLetter) -> list[Row]:
    """A discard deletes the dead letter for good."""
    return [(dead, DELETION, "Discarded.")]
