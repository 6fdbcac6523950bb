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
import threading
import traceback
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from django_jobretry import exceptions
from django_jobretry.conf import jobretry_settings
from django_jobretry.models.job import ACTOR_MAX_LENGTH
from django_jobretry.policy import ErrorKind


class AttemptEnd(enum.StrEnum):
    """Why an attempt ended: stored on every history entry."""

    ERROR = "error"
    FATAL = "fatal"
    UNKNOWN_TASK = "unknown_task"
    LEASE_EXPIRED = "lease_expired"
    WORKER_EXIT = "worker_exit"
    SHUTDOWN = "shutdown"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    #: Not failures: the job raised Snooze or CircuitOpen, and got its attempt back.
    SNOOZED = "snoozed"
    CIRCUIT_OPEN = "circuit_open"


#: How an attempt that gave itself back ended (jobs/decisions.py): not a failure.
DEFERRALS = frozenset({AttemptEnd.SNOOZED, AttemptEnd.CIRCUIT_OPEN})


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
    #: Which rule made the error fatal ("FatalError raised by the job", "ValueError is in the
    #: fatal_errors of policy 'webhooks'"), or which snooze budget a deferral spent ("max_snoozes (20)
    #: of policy 'partner'"); only on such entries, absent from earlier ones.
    rule: NotRequired[str]
    #: The failure group the task chose, from its exception's ``fingerprint`` attribute
    #: (models/fingerprints.py); absent when it chose none.
    fingerprint: NotRequired[str]
    #: The trace of the attempt's span (jobs/tracing.py), 32 hex digits; absent without tracing.
    trace_id: NotRequired[str]
    #: A CircuitOpen of its breaker's probe: not counted against the snooze budget (jobs/decisions.py).
    probe: NotRequired[bool]


#: Characters of a fatal entry's rule kept.
RULE_CHARS = 300
#: Characters of a task's own fingerprint kept.
FINGERPRINT_CHARS = 200


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
    #: When the job that died was enqueued and first attempted (the start of a
    #: task result that spans requeues); absent from entries written by earlier versions.
    enqueued_at: NotRequired[str]
    first_attempt_at: NotRequired[str | None]
    #: The task id in the system that ran it, for a dead letter from an adapter (django-q2).
    external_id: NotRequired[str | None]
    #: Set when the arguments were repaired first (deadletters/repair.py): ``by`` and ``changes``,
    #: each ``{"path", "change", "old"?, "new"?}``; as private as the arguments.
    repair: NotRequired[dict[str, Any]]


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


def recorded_actor(actor: str) -> str:
    """Who acts (cancels, requeues, discards) as recorded: at most ACTOR_MAX_LENGTH characters.

    The name comes from outside - an admin user's username, whatever the
    project's user model allows, or a command-line option, decoded with
    surrogateescape - and must never make the action itself fail.
    """
    return clean_text(actor, ACTOR_MAX_LENGTH)


@dataclass(frozen=True)
class RenderedError:
    """The text of a handler's exception, rendered once, off the worker's main loop."""

    error_class: str
    message: str
    traceback: str
    #: The exception's ``fingerprint`` attribute when it is a non-empty string, else "".
    fingerprint: str = ""


#: Seconds a handler's exception gets to render its text (``__str__``, traceback).
RENDER_SECONDS = 2.0


def render_error(error: BaseException, timeout: float | None = None) -> RenderedError:
    """Class, message and traceback of ``error``, whatever its ``__str__`` does.

    The exception is user code: its ``__str__`` may raise (even
    ``SystemExit``), or take minutes. It runs in a helper thread bounded by
    ``timeout`` (default RENDER_SECONDS); past that the failure is recorded
    with a placeholder message, and the helper thread is left to finish on
    its own.
    """
    timeout = RENDER_SECONDS if timeout is None else timeout
    done: list[RenderedError] = []
    helper = threading.Thread(target=lambda: done.append(_render(error)), name="jobretry-render", daemon=True)
    helper.start()
    helper.join(timeout)
    if done:
        return done[0]
    return RenderedError(_class_name(error), f"the error's text did not render within {timeout:g} s", "")


def _render(error: BaseException) -> RenderedError:
    try:
        message = str(error)
    except BaseException:  # a broken __str__ (even SystemExit) must not hide the failure
        try:
            message = repr(error)
        except BaseException:
            message = f"<unprintable {_qualname(error)}>"
    try:
        trace = "".join(traceback.format_exception(error))
    except BaseException:
        trace = ""
    return RenderedError(_class_name(error), message, trace, _own_fingerprint(error))


def _own_fingerprint(error: BaseException) -> str:
    """The failure group a task names on its exception (``fingerprint = "partner-down"``), or "".

    Read like ``__str__``: a property that raises, or a value that is not a
    string, counts as no fingerprint, never as a second failure.
    """
    try:
        chosen = getattr(error, "fingerprint", None)
    except BaseException:
        return ""
    return clean_text(chosen, FINGERPRINT_CHARS) if isinstance(chosen, str) else ""


def _class_name(error: BaseException) -> str:
    """The class's import path; ours under django_jobretry.exceptions, where users import them from.

    ``FatalError`` is defined in the pure policy package but documented and
    imported as ``django_jobretry.exceptions.FatalError`` (or
    ``django_jobretry.FatalError``): the stored name is the one operators
    filter on and ``django.tasks`` imports.
    """
    try:
        klass, name = type(error), _qualname(error)
        module = klass.__module__
        if module.startswith("django_jobretry.") and getattr(exceptions, name, None) is klass:
            module = exceptions.__name__
        return f"{module}.{name}"
    except BaseException:  # a metaclass can make even these raise
        return "<unnamed exception class>"


def _qualname(error: BaseException) -> str:
    try:
        return str(type(error).__qualname__)
    except BaseException:
        return "<unnamed exception class>"


def attempt_entry(
    attempt: int,
    ended: AttemptEnd,
    kind: ErrorKind,
    worker: str,
    *,
    error_class: str = "",
    message: str = "",
    traceback_text: str = "",
    rule: str | None = None,
    fingerprint: str = "",
) -> AttemptEntry:
    """The one constructor of an attempt entry; every text is cleaned and bounded."""
    entry: AttemptEntry = {
        "attempt": attempt,
        "error_class": clean_text(error_class, 200),
        "message": clean_text(message, jobretry_settings.error_message_chars),
        "traceback": clean_text(traceback_text, jobretry_settings.traceback_chars, keep_end=True),
        "kind": kind.value,
        "ended": ended.value,
        "worker": clean_text(worker, 200),
    }
    if rule:
        entry["rule"] = clean_text(rule, RULE_CHARS)
    if fingerprint:
        entry["fingerprint"] = clean_text(fingerprint, FINGERPRINT_CHARS)
    return entry


def error_entry(
    attempt: int,
    error: RenderedError,
    kind: ErrorKind,
    ended: AttemptEnd,
    worker: str,
    *,
    rule: str | None = None,
) -> AttemptEntry:
    """The entry for a failed attempt; ``at`` is set by the database."""
    return attempt_entry(
        attempt,
        ended,
        kind,
        worker,
        error_class=error.error_class,
        message=error.message,
        traceback_text=error.traceback,
        rule=rule,
        fingerprint=error.fingerprint,
    )


def minimal_entry(
    attempt: int, ended: AttemptEnd, kind: ErrorKind, worker: str, *, rule: str | None = None
) -> AttemptEntry:
    """The fallback when even a cleaned entry could not be stored."""
    return attempt_entry(attempt, ended, kind, worker, message="the error could not be recorded", rule=rule)


def event_entry(attempt: int, ended: AttemptEnd, message: str, worker: str) -> AttemptEntry:
    """An entry for an attempt that ended without an exception (lease lost, shutdown)."""
    return attempt_entry(attempt, ended, ErrorKind.RETRYABLE, worker, message=message)


def what_ended(entry: AttemptEntry) -> str:
    """'failed with builtins.ValueError', 'timed out', 'was cut off by shutdown', ..."""
    ended = entry["ended"]
    if ended == AttemptEnd.SHUTDOWN:
        return "was cut off by shutdown"
    if ended == AttemptEnd.TIMEOUT:
        return "timed out"
    if ended == AttemptEnd.CANCELLED:
        return "was cancelled"
    return f"failed with {entry['error_class']}" if entry["error_class"] else "failed"
