"""How far a running job got (docs/progress.md): four columns on the job row, and the same on its dead letter.

A job reports ``progress(done, total, note)`` from inside (jobs/progress.py);
the values land on its row, throttled, and a burial copies them onto the
dead letter, so an operator reading why a job died also reads how far it
got. Each claim clears them: a new attempt starts with no progress, and a
requeued job, a new row, with none either.

Nullable, without database defaults: an enqueue writes them as literal
NULLs in its statement text (jobs/insert.py), binding nothing and returning
nothing more, and the raw INSERTs of schedules, flows and requeues leave
them out.
"""

from __future__ import annotations

from django.db import models

#: Longest note kept; a longer one is cut (jobs/progress.py).
NOTE_MAX_LENGTH = 200


class ProgressColumns(models.Model):
    """The progress of the attempt that ran last: what it reported, and when it was written."""

    #: How much is done; NULL: no progress reported by this attempt (yet).
    progress_done = models.BigIntegerField(null=True, blank=True)
    #: Out of how much; NULL: the job did not say.
    progress_total = models.BigIntegerField(null=True, blank=True)
    #: What the job is doing, in its own words; NULL: no note. Not job arguments: shown to every viewer.
    progress_note = models.CharField(max_length=NOTE_MAX_LENGTH, null=True, blank=True)  # noqa: DJ001
    #: When the value was written (database clock).
    progress_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


def progress_counts(table: str) -> models.CheckConstraint:
    """No progress at all, or ``0 <= done``, ``done <= total`` when a total is given, and its time.

    A total alone (without ``done``) is refused: it would show as nothing done.
    """
    reported = models.Q(progress_done__isnull=False, progress_done__gte=0, progress_at__isnull=False) & (
        models.Q(progress_total__isnull=True) | models.Q(progress_done__lte=models.F("progress_total"))
    )
    nothing = models.Q(progress_done__isnull=True, progress_total__isnull=True)
    return models.CheckConstraint(condition=nothing | reported, name=f"{table}_progress_counts")
