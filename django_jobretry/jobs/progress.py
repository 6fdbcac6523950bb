"""``progress(done, total=None, note="")``: how far a running job got, on its row and on its dead letter.

A job that runs for minutes is a black box without it; with it, the admin,
``jobstatus`` and, once the job died, its dead letter say how far it got
(docs/progress.md). Jobs call it in their inner loops, thousands of times a
second, so a call costs a statement only now and then. Each attempt keeps
its latest value in memory (:class:`Reporter`) and writes it:

- at the first call;
- at a later call, once :data:`INTERVAL_SECONDS` have passed since the last write;
- when the attempt ends, returned or raised, before its outcome is recorded
  (worker/runner.py ``_handle``, worker/event_loop.py for coroutines): a
  success or a burial then reads the last value.

N calls within a second thus cost at most three statements, and a longer
run one more a second. A value reported less than the interval after a
write waits for a later call or for the end of the attempt.

A write is one UPDATE (statements.PROGRESS), fenced like a heartbeat: once
the attempt lost its lease it matches no row. It runs on the connection of
the calling thread, in autocommit. Inside a transaction the job opened
itself it would be part of that transaction: gone if it rolls back, and
holding the job's row locked, so the worker's heartbeat would wait for it.
So a call in there only keeps the value, which the next call outside the
transaction, or the end of the attempt, writes.

``async def`` jobs: ``progress()`` keeps the value without a query (Django
refuses synchronous queries in an event loop); ``await aprogress(...)``
writes it as well, through asgiref's ``sync_to_async`` (on its thread's
connection: not inside ``testing.run_jobs``' transaction, which it cannot see).

Outside an attempt (a shell, a test calling the function itself, a
django-q2 task) both check their arguments and do nothing else. A write the
database refuses (it is down) is logged and changes nothing else: the job
goes on, and the value waits for the next write.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import reprlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError, InterfaceError, connection

from django_jobretry.exceptions import InvalidProgress
from django_jobretry.jobs import statements
from django_jobretry.jobs.claimed import ClaimedJob
from django_jobretry.jobs.events import JOB_LINE, job_line_args, log_extra
from django_jobretry.jobs.history import clean_text
from django_jobretry.jobs.sql import loggable, statement_guard
from django_jobretry.models.progress import NOTE_MAX_LENGTH

logger = logging.getLogger("django_jobretry")

#: Least time between two writes of one attempt's progress, in seconds.
INTERVAL_SECONDS = 1.0
#: The largest ``done`` or ``total``: the columns are bigints.
LARGEST = 2**63 - 1


@dataclass(frozen=True)
class Progress:
    """One reported value, checked; ``note`` None: no note."""

    done: int
    total: int | None = None
    note: str | None = None


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= LARGEST:
        raise InvalidProgress(
            f"progress(): {name} must be a whole number from 0 to {LARGEST}, not {reprlib.repr(value)}"
        )
    return value


def checked(done: object, total: object = None, note: object = "") -> Progress:
    """The value ``progress()`` keeps: counts in range, ``done <= total``, the note cut to NOTE_MAX_LENGTH.

    A long note is cut rather than refused: a file name in it must not fail
    a job at 99 %. NUL and lone surrogates, which PostgreSQL refuses, are replaced.
    """
    count = _count("done", done)
    out_of = None if total is None else _count("total", total)
    if out_of is not None and count > out_of:
        raise InvalidProgress(f"progress(): done ({count}) is more than total ({out_of})")
    if not isinstance(note, str):
        raise InvalidProgress(f"progress(): note must be a string, not {type(note).__name__}")
    return Progress(count, out_of, clean_text(note, NOTE_MAX_LENGTH) or None)


class Reporter:
    """One attempt's progress: its latest value, and when the last one was written.

    ``depth``: how many transactions were open on the attempt's connection
    when it started (``django_jobretry.testing`` runs jobs inside the test's);
    one more is the job's own. ``clock`` is injected by the tests.
    """

    def __init__(
        self,
        job: ClaimedJob,
        *,
        depth: int = 0,
        interval: float = INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.job, self.depth, self.interval, self.clock = job, depth, interval, clock
        self.latest: Progress | None = None
        self.written: Progress | None = None
        self.next_write = -math.inf

    def offer(self, value: Progress, *, writable: bool = True) -> Progress | None:
        """Keep ``value``; return it when it is to be written now (it then counts as written)."""
        self.latest = value
        if not writable or value == self.written:
            return None
        now = self.clock()
        if now < self.next_write:
            return None
        self.written, self.next_write = value, now + self.interval
        return value

    def unwritten(self) -> Progress | None:
        """The latest value when it was not written yet: what the end of the attempt writes."""
        if self.latest is None or self.latest == self.written:
            return None
        self.written = self.latest
        return self.latest

    def writable(self) -> bool:
        """Whether this thread's connection is outside any transaction the job opened."""
        return len(connection.atomic_blocks) <= self.depth

    def write(self, value: Progress) -> bool:
        """One fenced UPDATE on this thread's connection; False when refused (logged; the value waits)."""
        job = self.job
        params: dict[str, Any] = {"id": job.id, "attempt": job.attempt, "token": job.token}
        params.update(done=value.done, total=value.total, note=value.note)
        try:
            with statement_guard(), connection.cursor() as cursor:
                cursor.execute(statements.PROGRESS, params)
        except (DatabaseError, InterfaceError) as exc:
            if self.written == value:
                self.written = None
            fields = loggable(exc)
            logger.warning(
                f"{JOB_LINE}: its progress was not written (%s, SQLSTATE %s); the job goes on",
                *job_line_args(job),
                fields["error_class"],
                fields["sqlstate"],
                extra=log_extra(job, "progress_not_written", **fields),
            )
            return False
        return True

    def write_elsewhere(self, value: Progress) -> None:
        """:meth:`write` from asgiref's thread, whose connection stays open between writes and jobs.

        No transaction is ever open there between two calls, so a connection
        that failed is closed, and the next write opens a new one.
        """
        if not self.write(value):
            connection.close()


_reporter: contextvars.ContextVar[Reporter | None] = contextvars.ContextVar("jobretry_progress", default=None)


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def progress(done: int, total: int | None = None, note: str = "") -> None:
    """Say how far the running job got: ``done`` of ``total`` (None: unknown), and what it is doing.

    Cheap enough for an inner loop (see the module's docstring for when it
    writes). Outside a job it checks its arguments and does nothing; in an
    event loop it only keeps the value: use :func:`aprogress` there.
    Raises :class:`~django_jobretry.exceptions.InvalidProgress` for counts
    that are not whole numbers from 0, ``done`` above ``total``, or a note that is not text.
    """
    value = checked(done, total, note)
    reporter = _reporter.get()
    if reporter is None:
        return
    if _in_event_loop():
        reporter.offer(value, writable=False)
        return
    due = reporter.offer(value, writable=reporter.writable())
    if due is not None:
        reporter.write(due)


async def aprogress(done: int, total: int | None = None, note: str = "") -> None:
    """:func:`progress` for ``async def`` jobs: the same checks and throttle, the write off the event loop.

    The write goes through another connection, asgiref's thread's: none
    while the attempt runs inside a transaction (``testing.run_jobs`` in a
    ``TestCase``), whose job row that connection could not see.
    """
    value = checked(done, total, note)
    reporter = _reporter.get()
    if reporter is None:
        return
    due = reporter.offer(value, writable=reporter.depth == 0)
    if due is not None:
        await sync_to_async(reporter.write_elsewhere)(due)


def begin(job: ClaimedJob) -> contextvars.Token[Reporter | None]:
    """The attempt of ``job`` starts in this thread: progress reported from now on is its own."""
    return _reporter.set(Reporter(job, depth=len(connection.atomic_blocks), interval=INTERVAL_SECONDS))


def end(token: contextvars.Token[Reporter | None]) -> None:
    """The attempt ended (its function returned or raised): write its last value, if it was not written.

    Not on a connection whose transaction must be rolled back (a job that
    broke ``testing.run_jobs``' transaction): the statement could only fail.
    """
    reporter = _reporter.get()
    _reporter.reset(token)
    last = None if reporter is None else reporter.unwritten()
    if reporter is not None and last is not None and not connection.needs_rollback:
        reporter.write(last)


async def aend(token: contextvars.Token[Reporter | None]) -> None:
    """:func:`end` for a coroutine on the worker's event loop: its last value written off the loop."""
    reporter = _reporter.get()
    _reporter.reset(token)
    last = None if reporter is None else reporter.unwritten()
    if reporter is not None and last is not None:
        await sync_to_async(reporter.write_elsewhere)(last)
