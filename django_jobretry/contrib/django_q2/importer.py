"""Existing django-q2 ``Failure`` rows as dead letters: mapping and recording (the import command's engine).

django-q2 keeps a failed task as a ``Task`` row with ``success=False`` (its
``Failure`` proxy): function path, pickled arguments, group, cluster, the
"error : traceback" text and an attempt count. Each one becomes a dead
letter with source "django_q2", filled like the adapter fills the ones it
buries (monitor.bury): the function path as task name, the cluster's queue,
JSON renderings of the arguments, one history entry built from the result
text, and, for requeue, a package signed like django-q2's own (the
function, arguments, hook, group and cluster of the failure; django-q2 does
not keep a task's own ``timeout=``). The insert itself, once per task, is
deadletters/external.py; the reading, in pages bounded by bytes
and without unpickling anything, is :mod:`.failure_rows`.

A Failure row is not signed, so nothing in it is trusted: its pickles are
loaded as plain data only, and its function and hook must be task
functions of the project (both :mod:`.failure_rows`) before the package
that names them is signed. Each row is judged on its own: one that fails a
check, cannot be signed (arguments nested too deep to pickle), fails in a
way not foreseen here, or is refused by the database when written, is
skipped, named with the reason (in the report and in a warning logged) and
left where it was, to be tried again by a later run; the rest are imported.

Skipped, and counted:

- a task still in django-q2's queue (an ORM-broker row whose package has
  the task id): django-q2, or the adapter's retry, will deliver it again;
- a failure that cannot be read here: no function path, one that is not a
  task of the project, pickles that are not plain data, arguments too deep
  to sign, or times outside what a dead letter holds.

The ``Failure`` rows are kept: django-q2's admin still shows them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django_jobretry.contrib.django_q2.failure_rows import (
    NotPlainData,
    QueueWatch,
    pages,
    plain_data,
    refusal,
    selection,
)
from django_jobretry.contrib.django_q2.hooks import configured_policy, from_result_text
from django_jobretry.contrib.django_q2.rendering import arguments, json_safe
from django_jobretry.deadletters.external import ExternalDeadLetter, import_dead_letters, known
from django_jobretry.jobs.history import AttemptEnd, attempt_entry
from django_jobretry.models import DeadLetterSource, DeadReason
from django_jobretry.policy import ErrorKind

logger = logging.getLogger("django_jobretry")

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
    #: Task id -> why it was not (dry run: would not be) imported.
    unreadable: dict[str, str] = field(default_factory=dict)

    def skipped(self, task_id: str, why: str) -> None:
        """``task_id`` is left where it is, for the reason ``why``: reported here and logged."""
        self.unreadable[task_id] = why
        logger.warning(
            "django-q2 task %s not imported: %s",
            task_id,
            why,
            extra={"outcome": "import_skipped", "source": SOURCE, "external_id": task_id, "reason": why},
        )


def _plain(row: dict[str, Any], column: str, what: str) -> Any:
    try:
        return plain_data(row[f"raw_{column}"])
    except NotPlainData as exc:
        raise _Unreadable(f"its {what} cannot be unpickled here: {exc}") from None


def _package(row: dict[str, Any], func: str) -> dict[str, Any]:
    """The package django-q2 would have signed for this task; _Unreadable when it cannot be trusted."""
    from django_q.conf import Conf

    for path, what in ((func, "function"), (row["hook"], "hook")):
        if path and (why := refusal(path, what)) is not None:  # no hook: None, or "" (django-q2 skips it)
            raise _Unreadable(why)
    args, kwargs = _plain(row, "args", "arguments"), _plain(row, "kwargs", "arguments")
    args = () if args is None else args
    kwargs = {} if kwargs is None else kwargs
    if not isinstance(args, tuple | list) or not isinstance(kwargs, dict):
        raise _Unreadable("its arguments are not a tuple and a dict")
    package: dict[str, Any] = {
        "id": row["id"],
        "name": row["name"],
        "func": func,
        "args": tuple(args),
        "kwargs": dict(kwargs),
        "started": row["started"],
    }
    for key in ("hook", "group", "cluster"):
        if row[key] is not None:
            package[key] = row[key]
    # What async_task adds to every package from Q_CLUSTER.
    if Conf.ACK_FAILURES:
        package["ack_failure"] = Conf.ACK_FAILURES
    if Conf.CACHED:
        package["cached"] = Conf.CACHED
    return package


def dead_letter_for(row: dict[str, Any], policy_name: str) -> ExternalDeadLetter:
    """The dead letter of one Failure row (as :func:`.failure_rows.pages` reads it); _Unreadable if none."""
    from django_q.conf import Conf
    from django_q.signing import SignedPackage

    func = row["func"]
    if not isinstance(func, str) or not func.strip():
        raise _Unreadable("it names no function")
    for column in ("started", "stopped"):  # None: beyond the dead letters table's CHECKs (models/instants.py)
        if row[column] is None:
            raise _Unreadable(f"its {column} time {row[f'text_{column}']} is outside years 1 to 9999")
    package = _package(row, func)
    try:
        payload = SignedPackage.dumps(package)
    except RecursionError:  # plain data the unpickler could build, too deep for pickle.dumps
        raise _Unreadable("its arguments are nested too deep to be signed for requeue") from None
    result = _plain(row, "result", "result")
    verdict = from_result_text(result if isinstance(result, str) else json_safe(result))
    queue = str(row["cluster"] or Conf.CLUSTER_NAME)
    timeout = verdict["error_class"].endswith("TimeoutException")
    attempts = max(int(row["attempt_count"] or 0), 1)
    entry = attempt_entry(
        attempts,
        AttemptEnd.TIMEOUT if timeout else AttemptEnd.ERROR,
        ErrorKind.RETRYABLE,
        f"django-q2 {queue}",
        error_class=verdict["error_class"],
        message=verdict["message"],
        traceback_text=verdict["traceback"],
    )
    entry["at"] = row["stopped"].isoformat()
    args, kwargs = arguments(package["args"], package["kwargs"])
    return ExternalDeadLetter(
        source=SOURCE,
        external_id=str(row["id"]),
        task_name=func,
        queue_name=queue,
        policy_name=policy_name,
        args=args,
        kwargs=kwargs,
        reason=DeadReason.EXHAUSTED,  # django-q2 gave up on it (or dropped it) after these attempts
        attempts=attempts,
        max_attempts=attempts,
        errors=[entry],
        enqueued_at=row["started"],
        dead_at=row["stopped"],
        external_name=str(row["name"] or ""),
        external_group=None if row["group"] is None else str(row["group"]),
        external_payload=payload,
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
        for batch in pages(failures):
            # Read the queue after the batch: a task not queued now never comes back under
            # its id, and one the adapter buried meanwhile has its dead letter committed already.
            queued = watch.current()
            letters = []
            for row in batch:
                if row["id"] in queued:
                    report.queued.append(row["id"])
                    continue
                try:
                    letters.append(dead_letter_for(row, policy_name))
                except _Unreadable as exc:
                    report.skipped(row["id"], str(exc))
                except Exception as exc:  # one row must not stop the others; the text may quote its data
                    report.skipped(row["id"], f"it cannot be imported here ({type(exc).__name__})")
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
    for task_id, why in result.refused.items():
        report.skipped(task_id, why)
        report.funcs.pop(task_id, None)
    report.imported.update(result.created)
    report.already_imported += result.already_imported
    report.already_dead += result.already_dead
