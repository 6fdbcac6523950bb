"""History entries: bounded, scrubbed, and impossible to fail to record.

Whatever a handler raised - a 10 MB message, NUL bytes, lone surrogates, a
``__str__`` that itself raises - the worker must still record the failure
(docs/design.md#rule-6), or a poison job would loop without a trace.

The two entry shapes, :class:`AttemptEntry` (one per ended attempt, on
``errors``) and :class:`RequeueEntry` (one per requeue, on
``requeue_history``), are defined once here; the SQL that writes them and
the admin and CLI that read them use these keys.
"""

from __future__ import annotations

import enum
import traceback
from typing import NotRequired, TypedDict

from django_jobretry.conf import jobretry_settings
from django_jobretry.policy import ErrorKind


class AttemptEnd(enum.StrEnum):
    """Why an attempt ended: stored on every history entry."""

    ERROR = "error"
    FATAL = "fatal"
    UNKNOWN_TASK = "unknown_task"
    LEASE_EXPIRED = "lease_expired"
    WORKER_EXIT = "worker_exit"
    SHUTDOWN = "shutdown"


class AttemptEntry(TypedDict):
    """One ended attempt. ``at`` is the database's time; ``delay`` (seconds) only on retries."""

    attempt: int
    error_class: str
    message: str
    traceback: str
    kind: str
    ended: str
    worker: str
    at: NotRequired[str]
    delay: NotRequired[float]


class RequeueEntry(TypedDict):
    """One requeue: the dead letter a job came from, who requeued it and when (``at``)."""

    dead_letter_id: int
    job_id: int
    reason: str
    attempts: int
    last_error: str
    dead_at: str
    by: str
    at: str


#: Characters of the dead letter's last error kept in a requeue entry.
REQUEUE_ERROR_CHARS = 500


def clean_text(text: str, limit: int, *, keep_end: bool = False) -> str:
    """Valid UTF-8 without NUL (PostgreSQL refuses both), at most ``limit`` characters.

    ``keep_end`` cuts the beginning instead: the end of a traceback (the
    raising frame) is the part worth keeping.
    """
    text = text.replace("\x00", "\\0").encode("utf-8", errors="replace").decode("utf-8")
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    if keep_end:
        marker = f"[{cut} characters cut] ..."
        room = max(limit - len(marker), 0)
        return marker + (text[-room:] if room else "")
    marker = f"... [{cut} characters cut]"
    return text[: max(limit - len(marker), 0)] + marker


def describe_error(error: BaseException) -> tuple[str, str]:
    """(dotted class name, message) of ``error``, even if its __str__ raises."""
    klass = type(error)
    name = f"{klass.__module__}.{klass.__qualname__}"
    try:
        message = str(error)
    except Exception:  # a broken __str__ must not hide the failure
        try:
            message = repr(error)
        except Exception:
            message = f"<unprintable {klass.__qualname__}>"
    return name, message


def attempt_entry(
    attempt: int,
    ended: AttemptEnd,
    kind: ErrorKind,
    worker: str,
    *,
    error_class: str = "",
    message: str = "",
    traceback_text: str = "",
) -> AttemptEntry:
    """The one constructor of an attempt entry; every text is cleaned and bounded."""
    return {
        "attempt": attempt,
        "error_class": clean_text(error_class, 200),
        "message": clean_text(message, jobretry_settings.error_message_chars),
        "traceback": clean_text(traceback_text, jobretry_settings.traceback_chars, keep_end=True),
        "kind": kind.value,
        "ended": ended.value,
        "worker": clean_text(worker, 200),
    }


def error_entry(
    attempt: int, error: BaseException, kind: ErrorKind, ended: AttemptEnd, worker: str
) -> AttemptEntry:
    """The entry for a failed attempt; ``at`` is set by the database."""
    name, message = describe_error(error)
    try:
        trace = "".join(traceback.format_exception(error))
    except Exception:
        trace = ""
    return attempt_entry(
        attempt, ended, kind, worker, error_class=name, message=message, traceback_text=trace
    )


def minimal_entry(attempt: int, ended: AttemptEnd, kind: ErrorKind, worker: str) -> AttemptEntry:
    """The fallback when even a cleaned entry could not be stored."""
    return attempt_entry(attempt, ended, kind, worker, message="the error could not be recorded")


def event_entry(attempt: int, ended: AttemptEnd, message: str, worker: str) -> AttemptEntry:
    """An entry for an attempt that ended without an exception (lease lost, shutdown)."""
    return attempt_entry(attempt, ended, ErrorKind.RETRYABLE, worker, message=message)
