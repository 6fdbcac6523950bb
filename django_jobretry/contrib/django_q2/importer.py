"""Existing django-q2 ``Failure`` rows as dead letters: reading and mapping (the import command's engine).

django-q2 keeps a failed task as a ``Task`` row with ``success=False`` (its
``Failure`` proxy): function path, pickled arguments, group, cluster, the
"error : traceback" text and an attempt count. Each one becomes a dead
letter with source "django_q2", filled like the adapter fills the ones it
buries (monitor.bury): the function path as task name, the cluster's queue,
JSON renderings of the arguments, one history entry built from the result
text, and, for requeue, a package signed like django-q2's own (the
function, arguments, hook, group and cluster of the failure; django-q2 does
not keep a task's own ``timeout=``). The insert itself, once per task, is
services/external_dead_letters.py.

Skipped, and counted:

- a task still in django-q2's queue (an ORM-broker row whose package has
  the task id): django-q2, or the adapter's retry, will deliver it again;
- a failure that cannot be read here: no function path, or arguments that
  do not unpickle (a class that no longer exists).

The ``Failure`` rows are kept: django-q2's admin still shows them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django_jobretry.contrib.django_q2.hooks import configured_policy, from_result_text
from django_jobretry.contrib.django_q2.rendering import json_safe
from django_jobretry.models import DeadLetterSource, DeadReason
from django_jobretry.policy import ErrorKind
from django_jobretry.services.external_dead_letters import ExternalDeadLetter, import_dead_letters, known
from django_jobretry.services.history import AttemptEnd, attempt_entry

#: Failure rows read, mapped and inserted per transaction: the unit of progress and of Ctrl-C loss.
BATCH = 500
#: Queue rows whose packages are decoded per query.
QUEUE_CHUNK = 1000
SOURCE = DeadLetterSource.DJANGO_Q2.value


class _Unreadable(Exception):
    """A failure that cannot become a replayable dead letter here; the message says why."""


@dataclass
class Report:
    """What an import did (or, dry run, would do), by django-q2 task id."""

    total: int = 0
    read: int = 0
    #: Task id -> new dead letter id (dry run: -> 0).
    imported: dict[str, int] = field(default_factory=dict)
    #: Function path of each imported (dry run: importable) task, for the listing.
    funcs: dict[str, str] = field(default_factory=dict)
    already_imported: list[str] = field(default_factory=list)
    already_dead: list[str] = field(default_factory=list)
    queued: list[str] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)


def selection(*, since: datetime | None, func: str | None) -> Any:
    """django-q2's failures, oldest id first (a stable keyset order while rows change)."""
    from django_q.models import Failure

    failures = Failure.objects.all()
    if since is not None:
        failures = failures.filter(stopped__gt=since)
    if func is not None:
        failures = failures.filter(func=func)
    return failures.order_by("pk")


def _batches(failures: Any) -> Iterator[list[Any]]:
    last = None
    while True:
        page = list((failures if last is None else failures.filter(pk__gt=last))[:BATCH])
        if not page:
            return
        yield page
        last = page[-1].pk


class QueueWatch:
    """Task ids in django-q2's ORM queue now; each row's package is decoded once."""

    def __init__(self) -> None:
        self._ids: dict[int, str | None] = {}

    def current(self) -> set[str]:
        from django_q.conf import Conf
        from django_q.models import OrmQ
        from django_q.signing import SignedPackage

        rows = OrmQ.objects.using(Conf.ORM or "default")
        pks = list(rows.values_list("pk", flat=True))
        new = [pk for pk in pks if pk not in self._ids]
        for start in range(0, len(new), QUEUE_CHUNK):
            for pk, payload in rows.filter(pk__in=new[start : start + QUEUE_CHUNK]).values_list(
                "pk", "payload"
            ):
                try:
                    self._ids[pk] = str(SignedPackage.loads(payload)["id"])
                except Exception:  # another SECRET_KEY, or garbage: django-q2 cannot run it either
                    self._ids[pk] = None
        return {task_id for pk in pks if (task_id := self._ids.get(pk))}


def dead_letter_for(failure: Any, policy_name: str) -> ExternalDeadLetter:
    """The dead letter of one ``Failure`` row; _Unreadable when it cannot be replayed."""
    from django_q.conf import Conf
    from django_q.signing import SignedPackage

    func = failure.func
    if not isinstance(func, str) or not func.strip():
        raise _Unreadable("it names no function")
    args = () if failure.args is None else failure.args
    kwargs = {} if failure.kwargs is None else failure.kwargs
    # A pickle that no longer loads comes back as its base64 text (picklefield).
    if not isinstance(args, tuple | list) or not isinstance(kwargs, dict):
        raise _Unreadable("its arguments cannot be unpickled here (a class that no longer exists?)")
    queue = str(failure.cluster or Conf.CLUSTER_NAME)
    package: dict[str, Any] = {
        "id": failure.pk,
        "name": failure.name,
        "func": func,
        "args": tuple(args),
        "kwargs": dict(kwargs),
        "started": failure.started,
    }
    for key in ("hook", "group", "cluster"):
        if getattr(failure, key) is not None:
            package[key] = getattr(failure, key)
    # What async_task adds to every package from Q_CLUSTER.
    if Conf.ACK_FAILURES:
        package["ack_failure"] = Conf.ACK_FAILURES
    if Conf.CACHED:
        package["cached"] = Conf.CACHED
    verdict = from_result_text(failure.result)
    timeout = verdict["error_class"].endswith("TimeoutException")
    attempts = max(int(failure.attempt_count or 0), 1)
    entry = attempt_entry(
        attempts,
        AttemptEnd.TIMEOUT if timeout else AttemptEnd.ERROR,
        ErrorKind.RETRYABLE,
        f"django-q2 {queue}",
        error_class=verdict["error_class"],
        message=verdict["message"],
        traceback_text=verdict["traceback"],
    )
    entry["at"] = failure.stopped.isoformat()
    return ExternalDeadLetter(
        source=SOURCE,
        external_id=str(failure.pk),
        task_name=func,
        queue_name=queue,
        policy_name=policy_name,
        args=json_safe(list(args)),
        kwargs=json_safe(dict(kwargs)),
        reason=DeadReason.EXHAUSTED,  # django-q2 gave up on it (or dropped it) after these attempts
        attempts=attempts,
        max_attempts=attempts,
        errors=[entry],
        enqueued_at=failure.started,
        dead_at=failure.stopped,
        external_name=str(failure.name or ""),
        external_group=None if failure.group is None else str(failure.group),
        external_payload=SignedPackage.dumps(package),
    )


def import_failures(
    *,
    since: datetime | None = None,
    func: str | None = None,
    dry_run: bool = False,
    progress: Callable[[Report], object] = lambda report: None,
) -> Report:
    """Import (dry run: assess) the selected failures, a batch per transaction.

    ``progress`` is called after each batch. A KeyboardInterrupt leaves the
    finished batches imported; the report so far is on the exception
    (``exc.report``).
    """
    failures = selection(since=since, func=func)
    report = Report(total=failures.count())
    policy_name = configured_policy() or "default"
    watch = QueueWatch()
    try:
        for batch in _batches(failures):
            # Read the queue after the batch: a task not queued now never comes back under
            # its id, and one the adapter buried meanwhile has its dead letter committed already.
            queued = watch.current()
            letters = []
            for failure in batch:
                if failure.pk in queued:
                    report.queued.append(failure.pk)
                    continue
                try:
                    letters.append(dead_letter_for(failure, policy_name))
                except _Unreadable as exc:
                    report.unreadable[failure.pk] = str(exc)
            report.funcs.update((letter.external_id, letter.task_name) for letter in letters)
            _record(report, letters, dry_run=dry_run)
            report.read += len(batch)
            progress(report)
    except KeyboardInterrupt as exc:
        exc.report = report  # type: ignore[attr-defined]
        raise
    return report


def _record(report: Report, letters: list[ExternalDeadLetter], *, dry_run: bool) -> None:
    if dry_run:
        imported, dead = known(SOURCE, [letter.external_id for letter in letters])
        report.already_imported += sorted(imported)
        report.already_dead += sorted(dead)
        report.imported.update(
            (letter.external_id, 0) for letter in letters if letter.external_id not in imported | dead
        )
        return
    result = import_dead_letters(letters)
    report.imported.update(result.created)
    report.already_imported += result.already_imported
    report.already_dead += result.already_dead
