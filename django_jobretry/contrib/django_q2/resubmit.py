"""Requeue of a django-q2 dead letter: the same task goes back to django-q2, never to our jobs table.

Called by the dead-letter service (deadletters/service.py) under its row
lock, in its transaction: the task is put in django-q2's ORM queue and the
service deletes the dead letter (deadletters/external.py) in that one
transaction, so the guarded compare-and-swap, permissions, admin, CLI and
signals are the ones every dead letter has.

What is replayed is the package django-q2 itself signed (SECRET_KEY), kept in
``external_payload``: the same function, arguments, group, timeout, hook and
cluster. A new task id is drawn (django-q2's Task rows are unique by id);
the attempt count starts again at 1 and the history and requeue provenance
come along.

On docs/design.md#rule-10 ("nothing read from the database is imported"):
django-q2 runs a task by locating its function path, which it reads from the
queue table; replaying one does no more than that. The path comes from the
signed package (a row edited by hand fails the signature check), and is
located here first so that a function that no longer exists is refused with
a clear error while the dead letter is kept.
"""

from __future__ import annotations

import pydoc

from django.core.signing import BadSignature
from django.utils import timezone

from django_jobretry.contrib.django_q2 import KEY
from django_jobretry.deadletters.external import Resubmitted
from django_jobretry.exceptions import CannotResubmit
from django_jobretry.jobs.history import REQUEUE_ERROR_CHARS, RequeueEntry
from django_jobretry.models import DeadLetter

#: Keys a finished run adds to a package; a fresh delivery starts without them.
RUN_KEYS = ("result", "success", "stopped", "ack_id", "time_taken", "attempt_count")


def resubmit(dead: DeadLetter, actor: str) -> Resubmitted:
    from django_q.brokers import get_broker
    from django_q.humanhash import uuid
    from django_q.signing import SignedPackage

    row = DeadLetter.objects.filter(pk=dead.pk).first()
    if row is None or not row.external_payload:
        raise CannotResubmit(dead.pk, "it has no django-q2 package to replay")
    try:
        package = SignedPackage.loads(row.external_payload)
    except BadSignature as exc:
        raise CannotResubmit(dead.pk, "its django-q2 package does not match this SECRET_KEY") from exc
    func = package.get("func")
    if isinstance(func, str) and not callable(pydoc.locate(func)):
        raise CannotResubmit(dead.pk, f"django-q2 cannot locate the function {func!r} here")
    now = timezone.now()
    entry: RequeueEntry = {
        "dead_letter_id": row.pk,
        "job_id": row.job_id,
        "external_id": row.external_id,
        "reason": row.reason,
        "attempts": row.attempts,
        "last_error": row.last_error[:REQUEUE_ERROR_CHARS],
        "dead_at": row.dead_at.isoformat(),
        "by": actor,
        "at": now.isoformat(),
        "enqueued_at": row.enqueued_at.isoformat(),
        "first_attempt_at": row.first_attempt_at.isoformat() if row.first_attempt_at else None,
    }
    for key in RUN_KEYS:
        package.pop(key, None)
    tag = uuid()
    package.update(id=tag[1], started=now)
    package[KEY] = {
        "policy": row.policy_name,
        "attempt": 1,
        "errors": row.errors,
        "enqueued_at": row.enqueued_at.isoformat(),
        "requeue_count": row.requeue_count + 1,
        "requeue_history": [*row.requeue_history, entry],
    }
    get_broker(package.get("cluster")).enqueue(SignedPackage.dumps(package))
    return Resubmitted(
        pk=str(tag[1]),
        task_name=row.task_name,
        queue_name=row.queue_name,
        requeue_count=row.requeue_count + 1,
        source=row.source,
    )
