"""What became of a dead letter or job whose admin URL no longer finds it.

Rows move: a requeued dead letter is deleted and a new job row carries its
story on; a job that dies is deleted and becomes a dead letter. A link kept
from before (a bookmark, a "Recent actions" entry, a chat message at 3 a.m.)
would otherwise say "doesn't exist. Perhaps it was deleted?" about something
that is running right now. So the not-found page asks where it went:

- the row it became carries its id in ``requeue_history`` (``dead_letter_id``
  and ``job_id`` of every earlier incarnation), found with JSON containment
  served by the GIN indexes on ``requeue_history`` (migration 0010);
- a job's own dead letter has its ``job_id`` (index ``jobretry_dead_job``);
- otherwise the admin log says whether it was discarded or resubmitted to
  django-q2 (admin actions only: the command line writes no LogEntry).

Only the current incarnation is named, and nothing a row holds beyond ids,
task and times is shown: never arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.db.models import QuerySet
from django.urls import reverse

from django_jobretry.admin import audit, rendering
from django_jobretry.models import DeadLetter, DeadLetterSource, Job

#: Columns read from a row found here: ids only, so no JSON and no timestamp is loaded.
_ID_ONLY = ("id",)


@dataclass(frozen=True)
class Fate:
    """Where a vanished row went: a message, its level, and the row to show if it still exists."""

    message: str
    level: int = messages.INFO
    job_id: int | None = None
    dead_letter_id: int | None = None

    def url(self, can_view_jobs: bool, can_view_dead: bool) -> str | None:
        """The admin page of the row it became, if the user may see it."""
        if self.job_id is not None and can_view_jobs:
            return reverse("admin:django_jobretry_job_change", args=[self.job_id])
        if self.dead_letter_id is not None and can_view_dead:
            return reverse("admin:django_jobretry_deadletter_change", args=[self.dead_letter_id])
        return None


def _carrying(model: type[Job] | type[DeadLetter], key: str, pk: int) -> int | None:
    """The id of the newest ``model`` row whose requeue history names ``key`` = ``pk``.

    ``requeue_count > 0`` is the partial GIN index's condition: the planner uses
    the index only when the query repeats it.
    """
    rows: QuerySet[Any] = model.objects.filter(requeue_count__gt=0, requeue_history__contains=[{key: pk}])
    row = rows.only(*_ID_ONLY).order_by("-pk").first()
    return None if row is None else int(row.pk)


def of_dead_letter(pk: int) -> Fate | None:
    """What became of dead letter ``pk``, when anything says so."""
    if pk <= 0:
        return None
    if (job := _carrying(Job, "dead_letter_id", pk)) is not None:
        return Fate(f"Dead letter {pk} was requeued: it is job {job} now.", job_id=job)
    if (dead := _carrying(DeadLetter, "dead_letter_id", pk)) is not None:
        return Fate(
            f"Dead letter {pk} was requeued and its job died again: it is dead letter {dead} now.",
            dead_letter_id=dead,
        )
    return _logged(pk)


def _logged(pk: int) -> Fate | None:
    """What the admin log says an operator did with dead letter ``pk``: discard, resubmit, requeue."""
    recorded = audit.last_recorded(pk)
    if recorded is None:
        return None
    by = f"by {recorded.entry.user.get_username()} at {rendering.time_text(recorded.entry.action_time)}"
    if recorded.what == "discarded":
        return Fate(f"Dead letter {pk} was discarded {by}.", messages.WARNING)
    if recorded.what == "resubmitted":
        return Fate(
            f"Dead letter {pk} was resubmitted to {recorded.source} {by} as its task {recorded.task}: "
            f"{recorded.source} runs it, so it has no job here."
        )
    # Requeued as a job that no longer exists: it succeeded and was pruned, or it died
    # again and that dead letter was discarded.
    return Fate(
        f"Dead letter {pk} was requeued as job {recorded.job_id} {by}; that job no longer exists "
        "(finished jobs are pruned).",
        messages.WARNING,
    )


def of_job(pk: int) -> Fate | None:
    """What became of job ``pk``: the dead letter it became, or the job a requeue made of it."""
    if pk <= 0:  # dead letters from another system have job_id 0
        return None
    dead = (
        DeadLetter.objects.filter(job_id=pk, source=DeadLetterSource.JOBRETRY)
        .only(*_ID_ONLY)
        .order_by("-pk")
        .first()
    )
    if dead is not None:
        return Fate(f"Job {pk} died: it is dead letter {dead.pk} now.", dead_letter_id=dead.pk)
    if (job := _carrying(Job, "job_id", pk)) is not None:
        return Fate(f"Job {pk} died and was requeued: it is job {job} now.", job_id=job)
    if (later := _carrying(DeadLetter, "job_id", pk)) is not None:
        return Fate(
            f"Job {pk} died, was requeued and died again: it is dead letter {later} now.",
            dead_letter_id=later,
        )
    return None
