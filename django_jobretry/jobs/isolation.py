"""One bad row fails alone: each schedule or breaker of a set is acted on in a savepoint of its own.

The scheduler and the heartbeat act on many rows at once. A row that cannot
be acted on (a count at its column's maximum, a release rate of 0 written
by hand, a value an older deploy stored) must not stop the others, nor go
unnoticed: :meth:`Apart.one` runs its block in a savepoint, and on failure
rolls back that block only, logs the row's name at ERROR (at DEBUG while it
keeps failing, so a row that fails at every beat logs once per stretch) and
lets the caller go on with the next row.

A lost connection is not a bad row: ``OperationalError`` and
``InterfaceError`` (which also cover lock and statement timeouts) are
raised as they are, for the thread's own handling. Database errors are
logged by class and SQLSTATE only (jobs.sql.loggable): their message
may quote the row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, transaction

from django_jobretry.jobs.sql import loggable

logger = logging.getLogger("django_jobretry")


class Apart:
    """The rows of one kind ("schedule", "circuit of task") acted on one at a time; remembers which fail."""

    def __init__(self, kind: str, field: str) -> None:
        #: How log lines name a row ("schedule nightly"), and the ``extra`` field that carries its name.
        self.kind, self.field = kind, field
        #: Rows whose last attempt failed: their next failure logs at DEBUG.
        self.failing: set[str] = set()

    def one(self, name: str, doing: str, *, savepoint: bool = True) -> _One:
        """A context manager: ``doing`` (for the log line) to row ``name``, in a savepoint, alone.

        ``savepoint=False`` for a block that only computes before the write
        (no statement to roll back): its failure is caught and logged the
        same way; its success does not end a failing stretch, the write's does.
        """
        return _One(self, name, doing, savepoint)


class _One:
    """One row's block: ``failed`` says, after it, whether the block was rolled back and skipped."""

    def __init__(self, apart: Apart, name: str, doing: str, savepoint: bool) -> None:
        self.apart, self.name, self.doing, self.writes = apart, name, doing, savepoint
        self.failed = False
        self._savepoint: AbstractContextManager[Any] = transaction.atomic() if savepoint else nullcontext()

    def __enter__(self) -> _One:
        self._savepoint.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        self._savepoint.__exit__(kind, exc, tb)  # rolls the block back when it raised
        if exc is None:
            if self.writes:
                self.apart.failing.discard(self.name)
            return False
        if not isinstance(exc, Exception) or isinstance(exc, OperationalError | InterfaceError):
            return False
        self.failed = True
        self._log(exc)
        return True

    def _log(self, exc: Exception) -> None:
        apart = self.apart
        level = logging.DEBUG if self.name in apart.failing else logging.ERROR
        apart.failing.add(self.name)
        fields: dict[str, Any] = (
            loggable(exc) if isinstance(exc, DatabaseError) else {"error_class": type(exc).__name__}
        )
        logger.log(
            level,
            "%s %s skipped: could not %s (%s%s); the others go on",
            apart.kind,
            self.name,
            self.doing,
            fields["error_class"],
            f", SQLSTATE {fields['sqlstate']}" if fields.get("sqlstate") else "",
            extra={apart.field: self.name, "outcome": "skipped_alone", **fields},
            exc_info=None if isinstance(exc, DatabaseError) else exc,
        )


def all_or_each[T, R](
    apart: Apart,
    items: Sequence[T],
    name_of: Callable[[T], str],
    doing: str,
    write: Callable[[Sequence[T]], R],
) -> list[R]:
    """``write(items)``: one statement for all of them, in a savepoint; if it fails, each item alone.

    The set-based write is the rule (a few statements whatever the number of
    rows); only when it fails is each item written in its own savepoint,
    so that the one that cannot be is named and skipped and the others
    written. Returns what each write that succeeded returned.
    """
    if not items:
        return []
    try:
        with transaction.atomic():
            written = write(items)
    except (OperationalError, InterfaceError):
        raise
    except Exception:  # one of them, unknown yet: each alone says which
        written_alone: list[R] = []
        for item in items:
            with apart.one(name_of(item), doing) as one:
                result = write([item])
            if not one.failed:
                written_alone.append(result)
        return written_alone
    apart.failing.difference_update(name_of(item) for item in items)
    return [written]
