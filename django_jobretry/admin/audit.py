"""Admin log (LogEntry) rows for operator actions, and what became of a row an old link no longer finds.

Every requeue and discard is an operator decision someone may have to
explain later, so each one leaves a LogEntry (docs/design.md#dead-letters). Django's
``log_actions`` gives every object of a bulk call the same message; ours
say which job each dead letter became, so the rows are built here and
inserted in one statement whatever the version (Django 5.2 to 6.1).

How Django shows an entry decides its flag and text. "Recent actions" on the
admin index shows the flag's icon and ``object_repr``, not the message, so
the repr says what happened ("Dead letter 12 requeued as job 345"). A
requeue is a CHANGE of the dead letter, not a DELETION: the dead letter
lives on as a job, and a CHANGE entry links to the dead letter's URL, which
leads to that job (:func:`fate_of_dead_letter`). A discard is a DELETION.
:func:`read` is the one parser of the messages.

The same user is the "by" the services record (requeue provenance, a pause's
or a schedule's actor, their logs): :func:`actor` names them for every page.

**What became of a row.** Rows move: a requeued dead letter is deleted and a
new job row carries its story on; a job that dies is deleted and becomes a
dead letter. A link kept from before (a bookmark, a "Recent actions" entry,
a chat message at 3 a.m.) would otherwise say "doesn't exist. Perhaps it was
deleted?" about something that is running right now. So the not-found page
asks where it went (:func:`fate_of_dead_letter`, :func:`fate_of_job`):

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

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from django.contrib import messages
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection, models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse

from django_jobretry.admin import rendering
from django_jobretry.deadletters.external import Resubmitted
from django_jobretry.models import DeadLetter, DeadLetterSource, Job

#: One row to log: the object, its action flag, a message in plain words, and the repr
#: "Recent actions" shows.
Row = tuple[models.Model, int, str, str]

#: ``object_repr`` is a CharField(200).
REPR_CHARS = 200

_REQUEUED = re.compile(r"Requeued as job (?P<job>[0-9]+)\.")
_RESUBMITTED = re.compile(r"Resubmitted to (?P<source>\S+) as task (?P<task>\S+)\.")
# Written by versions before this one: "Requeued as django_q2 task <id>."
_RESUBMITTED_BEFORE = re.compile(r"Requeued as (?P<source>\S+) task (?P<task>\S+)\.")
DISCARDED = "Discarded."


def actor(request: HttpRequest) -> str:
    """The name recorded as "by" in requeue provenance and the service's logs."""
    return request.user.get_username()


def log(request: HttpRequest, rows: Iterable[Row]) -> None:
    """Insert one LogEntry per row, attributed to the requesting user, in one statement.

    An ``INSERT ... SELECT FROM unnest`` of five arrays rather than
    ``bulk_create``: a 50,000 dead-letter requeue logs 100,000 entries, and
    building and quoting 700,000 parameters took longer than the requeue.
    """
    # Only logged-in staff reach the admin views, so there is always a user id.
    user_id = cast(int, request.user.pk)
    columns: tuple[list[int], list[str], list[str], list[int], list[str]] = ([], [], [], [], [])
    for obj, flag, message, shown in rows:
        columns[0].append(ContentType.objects.get_for_model(obj, for_concrete_model=False).pk)
        columns[1].append(str(obj.pk))
        columns[2].append(shown[:REPR_CHARS])
        columns[3].append(flag)
        columns[4].append(message)
    if not columns[0]:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {LogEntry._meta.db_table}
                (action_time, user_id, content_type_id, object_id, object_repr, action_flag, change_message)
            SELECT statement_timestamp(), %s, t.*
            FROM unnest(%s::int[], %s::text[], %s::text[], %s::smallint[], %s::text[]) AS t
            """,
            [user_id, *columns],
        )


def source_label(source: str) -> str:
    """A dead letter's source as people write it: "django-q2"."""
    return str(dict(DeadLetterSource.choices).get(source, source))


def requeued(dead: DeadLetter, job: Job | Resubmitted) -> list[Row]:
    """A requeue changes the dead letter into a job: both sides are logged."""
    if isinstance(job, Resubmitted):  # the new task is another system's, not one of our rows
        label = source_label(job.source)
        return [
            (
                dead,
                CHANGE,
                f"Resubmitted to {label} as task {job.pk}.",
                f"Dead letter {dead.pk} resubmitted to {label} ({dead.task_name})",
            )
        ]
    return [
        (
            dead,
            CHANGE,
            f"Requeued as job {job.pk}.",
            f"Dead letter {dead.pk} requeued as job {job.pk} ({dead.task_name})",
        ),
        (
            job,
            ADDITION,
            f"Requeued from dead letter {dead.pk} (job {dead.job_id}, {dead.reason}).",
            f"Job {job.pk} requeued from dead letter {dead.pk} ({dead.task_name})",
        ),
    ]


def discarded(dead: DeadLetter) -> list[Row]:
    """A discard deletes the dead letter for good."""
    return [(dead, DELETION, DISCARDED, f"Dead letter {dead.pk} discarded ({dead.task_name})")]


@dataclass(frozen=True)
class Recorded:
    """What an admin log entry says happened to a dead letter: requeued, resubmitted or discarded."""

    what: str  # "requeued", "resubmitted" or "discarded"
    entry: LogEntry
    job_id: int | None = None
    source: str = ""
    task: str = ""


def read(entry: LogEntry) -> Recorded | None:
    """The outcome an entry written by :func:`requeued` or :func:`discarded` records, else None."""
    message = entry.change_message
    if match := _REQUEUED.fullmatch(message):
        return Recorded("requeued", entry, job_id=int(match["job"]))
    if match := _RESUBMITTED.fullmatch(message) or _RESUBMITTED_BEFORE.fullmatch(message):
        return Recorded("resubmitted", entry, source=source_label(match["source"]), task=match["task"])
    if message == DISCARDED and entry.action_flag == DELETION:
        return Recorded("discarded", entry)
    return None


def last_recorded(dead_letter_id: int) -> Recorded | None:
    """The newest requeue, resubmit or discard the admin logged for this dead letter, if any.

    Only admin actions write a LogEntry: one made with ``manage.py deadletters``
    or the Python API leaves nothing here.
    """
    content_type = ContentType.objects.get_for_model(DeadLetter, for_concrete_model=False)
    entries = LogEntry.objects.filter(
        content_type=content_type, object_id=str(dead_letter_id), action_flag__in=(CHANGE, DELETION)
    ).select_related("user")
    for entry in entries.order_by("-action_time", "-pk")[:5]:
        if (found := read(entry)) is not None:
            return found
    return None


# -- what became of a row that is gone -------------------------------------------------------------

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


def fate_of_dead_letter(pk: int) -> Fate | None:
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
    recorded = last_recorded(pk)
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


def fate_of_job(pk: int) -> Fate | None:
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
