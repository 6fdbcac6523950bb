"""Attempt history entries: bounded, scrubbed, and impossible to fail to record.

Whatever a handler raised - a 10 MB message, NUL bytes, lone surrogates, a
``__str__`` that itself raises - the worker must still record the failure
(spec §4 rule 6), or a poison job would loop without a trace.
"""

from __future__ import annotations

import enum
import traceback
from typing import Any

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


def error_entry(
    attempt: int, error: BaseException, kind: ErrorKind, ended: AttemptEnd, worker: str
) -> dict[str, Any]:
    """One history entry for a failed attempt; ``at`` is set by the database."""
    name, message = describe_error(error)
    try:
        trace = "".join(traceback.format_exception(error))
    except Exception:
        trace = ""
    trace = clean_text(trace, jobretry_settings.traceback_chars, keep_end=True)
    return {
        "attempt": attempt,
        "error_class": clean_text(name, 200),
        "message": clean_text(message, jobretry_settings.error_message_chars),
        "traceback": trace,
        "kind": kind.value,
        "ended": ended.value,
        "worker": clean_text(worker, 200),
    }


def minimal_entry(attempt: int, ended: AttemptEnd, kind: ErrorKind, worker: str) -> dict[str, Any]:
    """The fallback when even a cleaned entry could not be stored."""
    return {
        "attempt": attempt,
        "error_class": "",
        "message": "the error could not be recorded",
        "traceback": "",
        "kind": kind.value,
        "ended": ended.value,
        "worker": clean_text(worker, 200),
    }


def event_entry(attempt: int, ended: AttemptEnd, message: str, worker: str) -> dict[str, Any]:
    """An entry for an attempt that ended without an exception (lease lost, shutdown)."""
    return {
        "attempt": attempt,
        "error_class": "",
        "message": clean_text(message, jobretry_settings.error_message_chars),
        "traceback": "",
        "kind": ErrorKind.RETRYABLE.value,
        "ended": ended.value,
        "worker": clean_text(worker, 200),
    }
