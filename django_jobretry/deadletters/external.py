"""Dead letters of another system (django-q2): its failures imported once, its tasks handed back.

Import: dead letters for failures another system recorded (django-q2 ``Failure`` rows), inserted once.

The caller (contrib/django_q2/importer.py) reads the other system and fills
an :class:`ExternalDeadLetter` per failure; this module is the only one that
writes them. Each failure is imported at most once, ever, even by two
imports running at the same time: the first step of a batch claims its
external ids in the ImportedFailure table (``INSERT .. ON CONFLICT DO
NOTHING``, in id order); only the ids claimed by this transaction become
dead letters, in the same transaction. A concurrent import blocks on the
ids the other holds, and skips them once it commits. The ImportedFailure
rows outlive the dead letters, so a requeued or discarded one is not
imported again.

A failure that already has a dead letter from the same source (the
django-q2 adapter buried it when it gave up) is claimed but not duplicated.

A letter the database refuses (a CHECK, a value it cannot store) must not
cost the others theirs: when the batch's statement fails so, each letter
is tried again on its own (a savepoint each, inside a caller's
transaction), and the refused ones are returned, not claimed, with the
constraint or error class that refused them (never the database's message,
which quotes the row).

Requeue goes the other way: a dead letter of another source is not revived
as one of our jobs but handed back to the system it came from. The adapter
registers how (``register_resubmitter``, from its ``AppConfig.ready()``); the
dead-letter service asks here (``resubmitter_for``), under the row lock it
holds, so the guarded compare-and-swap is the same for every source. The
adapter only hands the task back; the dead letter's delete is called here
(jobs/statements.py writes it, with every other write of a dead letter).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from django.db import DataError, IntegrityError, connections, router, transaction

from django_jobretry.exceptions import CannotResubmit
from django_jobretry.jobs import statements
from django_jobretry.jobs.history import AttemptEntry
from django_jobretry.models import DeadLetter, DeadReason, Death, ImportedFailure

logger = logging.getLogger("django_jobretry")

IMPORTED = ImportedFailure._meta.db_table


@dataclass(frozen=True)
class ExternalDeadLetter:
    """Everything a dead letter from another system holds; ``job_id`` is always 0."""

    source: str
    external_id: str
    task_name: str
    queue_name: str
    policy_name: str
    args: list[Any]
    kwargs: dict[str, Any]
    reason: DeadReason
    attempts: int
    max_attempts: int
    errors: list[AttemptEntry]
    enqueued_at: datetime
    #: None: now, by the database clock (a failure recorded as it happens).
    dead_at: datetime | None
    external_name: str = ""
    external_group: str | None = None
    #: What replay needs, as the other system signed it (django-q2: its SignedPackage).
    external_payload: str | None = None
    first_attempt_at: datetime | None = None
    requeue_count: int = 0
    requeue_history: list[Any] = field(default_factory=list)

    def to_model(self) -> DeadLetter:
        last: AttemptEntry | dict[str, str] = self.errors[-1] if self.errors else {}
        extra = {} if self.dead_at is None else {"dead_at": self.dead_at}
        return DeadLetter(
            source=self.source,
            job_id=0,  # never one of our jobs; external_id names the task
            task_name=self.task_name[:200],
            queue_name=self.queue_name[:100],
            policy_name=self.policy_name[:64],
            args=self.args,
            kwargs=self.kwargs,
            reason=self.reason,
            attempts=self.attempts,
            max_attempts=self.max_attempts,
            errors=self.errors,
            last_error_class=str(last.get("error_class", ""))[:200],
            last_error=str(last.get("message", "")),
            enqueued_at=self.enqueued_at,
            first_attempt_at=self.first_attempt_at,
            requeue_count=self.requeue_count,
            requeue_history=self.requeue_history,
            external_id=self.external_id,
            external_name=self.external_name[:100],
            external_group=None if self.external_group is None else self.external_group[:100],
            external_payload=self.external_payload,
            **extra,
        )


@dataclass
class Imported:
    """What one call did, by external id."""

    #: External id -> the new dead letter's id.
    created: dict[str, int] = field(default_factory=dict)
    #: Imported by an earlier run (or by a concurrent one): nothing written.
    already_imported: list[str] = field(default_factory=list)
    #: Had a dead letter of the same source already (the adapter's): remembered, not duplicated.
    already_dead: list[str] = field(default_factory=list)
    #: External id -> why the database refused it: nothing written for it, not claimed.
    refused: dict[str, str] = field(default_factory=dict)

    def add(self, other: Imported) -> None:
        self.created.update(other.created)
        self.already_imported += other.already_imported
        self.already_dead += other.already_dead
        self.refused.update(other.refused)


def import_dead_letters(letters: Sequence[ExternalDeadLetter]) -> Imported:
    """Create the dead letters of ``letters`` not imported before; one transaction.

    All of ``letters`` must have the same source. Returns what was created
    and what was skipped, and why. When the database refuses one of them,
    each is written in a transaction (or savepoint) of its own instead.
    """
    if not letters:
        return Imported()
    source = letters[0].source
    if any(letter.source != source for letter in letters):
        raise ValueError("import_dead_letters() takes letters of one source at a time")
    using = router.db_for_write(DeadLetter)
    try:
        result = _insert(using, source, letters)
    except (DataError, IntegrityError):
        result = Imported()
        for letter in letters:  # one of them is refused: which one
            try:
                result.add(_insert(using, source, [letter]))
            except (DataError, IntegrityError) as exc:
                result.refused[letter.external_id] = _refusal(exc)
    if result.created or result.already_dead:
        logger.info(
            "imported %s %s failures as dead letters",
            len(result.created),
            source,
            extra={
                "outcome": "imported",
                "source": source,
                "imported": len(result.created),
                "already_imported": len(result.already_imported),
                "already_dead": len(result.already_dead),
            },
        )
    return result


def _insert(using: str, source: str, letters: Sequence[ExternalDeadLetter]) -> Imported:
    """Claim ``letters`` and create the dead letters of those this transaction claimed."""
    by_id = {letter.external_id: letter for letter in letters}
    with transaction.atomic(using=using):
        claimed = _claim(using, source, sorted(by_id))
        existing = {
            str(i)
            for i in DeadLetter.objects.using(using)
            .filter(source=source, external_id__in=claimed)
            .values_list("external_id", flat=True)
        }
        rows = [by_id[i].to_model() for i in sorted(claimed - existing)]
        created = statements.import_dead_letters(using, rows)
    return Imported(
        created={str(row.external_id): int(row.pk) for row in created},
        already_imported=[i for i in by_id if i not in claimed],
        already_dead=sorted(existing),
    )


def _refusal(exc: DataError | IntegrityError) -> str:
    """Why the database refused a letter: the constraint's name, else the error's class."""
    constraint = getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None)
    return f"the database refused it ({constraint or type(exc).__name__})"


def bury_external(letter: ExternalDeadLetter) -> DeadLetter:
    """The dead letter of a task its adapter gave up on, recorded as imported in the same transaction.

    So a later ``import-django-q2`` never brings the task back from the other
    system's failure table, even after this dead letter was requeued or
    discarded. Runs in the caller's transaction (the adapter's, with its
    queue row locked).
    """
    using = router.db_for_write(DeadLetter)
    with transaction.atomic(using=using):
        dead = letter.to_model()
        statements.insert_dead_letter(dead, using)
        _claim(using, letter.source, [letter.external_id])
        # Counted as a death like our own burials (models/dead_letter.py); an import is not one.
        Death.objects.using(using).create(
            task_name=dead.task_name,
            queue_name=dead.queue_name,
            reason=dead.reason,
            error_class=dead.last_error_class,
            **({} if letter.dead_at is None else {"died_at": letter.dead_at}),
        )
    return dead


def _claim(using: str, source: str, external_ids: list[str]) -> set[str]:
    """The ids this transaction records as imported; those already recorded (or held) are not."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {IMPORTED} (source, external_id) "  # the table name is the model's
            "SELECT %s, i FROM unnest(%s::text[]) AS t(i) ORDER BY i "
            "ON CONFLICT (source, external_id) DO NOTHING RETURNING external_id",
            [source, external_ids],
        )
        return {row[0] for row in cursor.fetchall()}


def known(source: str, external_ids: Sequence[str]) -> tuple[set[str], set[str]]:
    """(imported before, have a dead letter) among ``external_ids``: what a dry run would skip."""
    imported = set(
        ImportedFailure.objects.filter(source=source, external_id__in=external_ids).values_list(
            "external_id", flat=True
        )
    )
    dead = {
        str(i)
        for i in DeadLetter.objects.filter(source=source, external_id__in=external_ids).values_list(
            "external_id", flat=True
        )
    }
    return imported, dead - imported


@dataclass(frozen=True)
class Resubmitted:
    """A dead letter handed back to the system it came from, instead of becoming a Job.

    ``pk`` is that system's new task id (django-q2: the task's uuid hex).
    """

    pk: str
    task_name: str
    queue_name: str
    requeue_count: int
    source: str


#: How a dead letter of another source is handed back: (locked dead letter, actor) ->
#: Resubmitted. Called in the transaction that holds the dead letter's row lock; it
#: writes only to the other system, in that transaction.
type Resubmitter = Callable[[DeadLetter, str], Resubmitted]
_resubmitters: dict[str, Resubmitter] = {}


def register_resubmitter(source: str, resubmitter: Resubmitter) -> None:
    """Route requeues of dead letters from ``source`` to ``resubmitter``."""
    _resubmitters[source] = resubmitter


def resubmitter_for(dead: DeadLetter) -> Resubmitter:
    """The requeue of ``dead``: its source's resubmitter, then the delete of the dead letter.

    CannotResubmit when no adapter registered one for the source.
    """
    hand_back = _resubmitters.get(dead.source)
    if hand_back is None:
        raise CannotResubmit(dead.pk, f"no adapter for source {dead.source!r} is installed")
    return partial(_resubmit, hand_back)


def _resubmit(hand_back: Resubmitter, dead: DeadLetter, actor: str) -> Resubmitted:
    """Hand the task back, then delete its dead letter: both in the caller's transaction, or neither."""
    resubmitted = hand_back(dead, actor)
    statements.hand_back(dead.pk)
    return resubmitted
