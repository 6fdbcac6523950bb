"""The Sentry events the integration sends: a dead letter's, a breaker's, a lost worker's.

A dead letter's event is built from its row, not from an exception: the
worker caught the exception attempts ago, on another thread, and what is
stored (error class, message, traceback text, the attempt history) is what
the admin shows. Its fingerprint is the dead letter's failure group
(models/fingerprints.py), so a Sentry issue is one of our failure groups.

Nothing here carries an argument by a side door: the message, the traceback
text and every breadcrumb pass :func:`~django_jobretry.jobs.events.scrubbed`
with the job's arguments (as log lines do), the parsed frames have no local
variables, and the arguments themselves are added only when the project opts
in, as PAYLOAD_REDACTOR returns them (docs/decisions/0004).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from django.urls import NoReverseMatch, reverse

from django_jobretry.display.redaction import redacted_payload
from django_jobretry.jobs.events import failure_phrase, scrubbed
from django_jobretry.models import DeadLetter

#: The logger name our events carry: Sentry shows it, and filters on it.
LOGGER = "django_jobretry"
#: Frames parsed from a stored traceback, at most (the innermost are kept).
MAX_FRAMES = 100

_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')
_HEADER = "Traceback (most recent call last):"


def dead_letter_event(
    dead: DeadLetter, *, admin_url: str | None, include_payload: bool, breadcrumbs: bool
) -> dict[str, Any]:
    """The event for one dead letter: its last error, tags, a link to its admin page, its attempts."""
    args, kwargs = dead.args, dead.kwargs
    # Arguments that could not be decoded cannot scrub a text: the texts are left out then.
    readable = isinstance(args, list) and isinstance(kwargs, dict)
    entries = (
        [entry for entry in dead.errors if isinstance(entry, dict)] if isinstance(dead.errors, list) else []
    )
    last = entries[-1] if entries else None
    context: dict[str, Any] = {
        "dead_letter_id": dead.pk,
        "job_id": dead.job_id,
        "reason": dead.reason,
        "attempts": dead.attempts,
        "max_attempts": dead.max_attempts,
        "failure_group": dead.fingerprint,
        "requeue_count": dead.requeue_count,
    }
    link = admin_link(dead.pk, admin_url)
    if link is not None:
        context["admin_url"] = link
    if include_payload:
        context.update(_payload(dead))
    event: dict[str, Any] = {
        "level": "error",
        "logger": LOGGER,
        "fingerprint": [dead.fingerprint],
        "transaction": dead.task_name,
        "tags": tags(dead),
        "contexts": {"dead letter": context},
    }
    if dead.last_error_class and readable:
        event["exception"] = {"values": [_exception(dead, last, args, kwargs)]}
    else:
        reason = dead.get_reason_display()
        event["message"] = f"{dead.task_name} died: {reason}"
    if breadcrumbs and readable:
        event["breadcrumbs"] = {"values": [_breadcrumb(entry, args, kwargs) for entry in entries[:-1]]}
    return event


def tags(dead: DeadLetter) -> dict[str, str]:
    """Task, queue, reason, attempt and (for a flow's step) the flow: what an issue is searched by."""
    found = {
        "jobretry.task": dead.task_name,
        "jobretry.queue": dead.queue_name,
        "jobretry.reason": str(dead.reason),
        "jobretry.attempt": str(dead.attempts),
    }
    if dead.flow_step_id is not None and dead.flow_step is not None:
        found["jobretry.flow"] = dead.flow_step.flow.name
        found["jobretry.flow_id"] = str(dead.flow_step.flow_id)
    if dead.schedule_name:
        found["jobretry.schedule"] = dead.schedule_name
    return found


def admin_link(dead_letter_id: int, base: str | None) -> str | None:
    """The dead letter's admin page, ``base`` (scheme and host) before the path; None without the admin."""
    try:
        path = reverse("admin:django_jobretry_deadletter_change", args=[dead_letter_id])
    except NoReverseMatch:
        return None
    return f"{base.rstrip('/')}{path}" if base else path


def circuit_event(task_name: str, open_until: datetime, opens: int, reason: str) -> dict[str, Any]:
    """A breaker opened: one issue per task, whatever the reason's words."""
    return _warning(
        f"circuit of task {task_name} opened ({opens} in a row): {reason}",
        "circuit_opened",
        task_name,
        {},
        {"circuit": {"open_until": open_until.isoformat(), "opens": opens, "reason": reason}},
    )


def worker_lost_event(
    job_id: int | str, task_name: str, queue_name: str, attempt: int, delay: timedelta
) -> dict[str, Any]:
    """An attempt lost with its worker (its lease expired) and retried: one issue per task."""
    return _warning(
        f"{task_name}: attempt {attempt} lost with its worker (lease expired)",
        "worker_lost",
        task_name,
        {"jobretry.queue": queue_name, "jobretry.attempt": str(attempt)},
        {"job": {"job_id": job_id, "retry_in_seconds": delay.total_seconds()}},
    )


def _warning(
    message: str, kind: str, task_name: str, tags: dict[str, str], contexts: dict[str, Any]
) -> dict[str, Any]:
    """An event of ``kind`` about a task, not a dead letter: grouped by kind and task."""
    return {
        "level": "warning",
        "logger": LOGGER,
        "message": message,
        "fingerprint": [f"jobretry.{kind}", task_name],
        "transaction": task_name,
        "tags": {"jobretry.task": task_name, "jobretry.event": kind, **tags},
        "contexts": contexts,
    }


def _exception(dead: DeadLetter, last: dict[str, Any] | None, args: Any, kwargs: Any) -> dict[str, Any]:
    module, _, name = dead.last_error_class.rpartition(".")
    value: dict[str, Any] = {
        "type": name,
        "value": scrubbed(dead.last_error, args, kwargs),
        "mechanism": {"type": "django_jobretry", "handled": False},
    }
    if module:
        value["module"] = module
    frames = _frames(scrubbed(str(last.get("traceback", "")), args, kwargs)) if last else []
    if frames:
        value["stacktrace"] = {"frames": frames}
    return value


def _frames(text: str) -> list[dict[str, Any]]:
    """The frames of the last exception in a traceback's text, outermost first; no local variables."""
    lines = text[text.rfind(_HEADER) :].splitlines() if _HEADER in text else []
    frames: list[dict[str, Any]] = []
    for index, line in enumerate(lines):
        match = _FRAME.match(line)
        if match is None:
            continue
        frame: dict[str, Any] = {
            "filename": match["path"],
            "abs_path": match["path"],
            "lineno": int(match["line"]),
            "function": match["function"],
        }
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if following.startswith("    ") and not _FRAME.match(following):
            frame["context_line"] = following.strip()
        frames.append(frame)
    return frames[-MAX_FRAMES:]


def _breadcrumb(entry: dict[str, Any], args: Any, kwargs: Any) -> dict[str, Any]:
    phrase, _ = failure_phrase(_entry(entry), (args, kwargs))
    crumb: dict[str, Any] = {
        "type": "default",
        "category": "jobretry.attempt",
        "level": "warning",
        "message": f"attempt {entry.get('attempt')} {phrase}",
    }
    if isinstance(entry.get("at"), str):
        crumb["timestamp"] = entry["at"]
    return crumb


def _entry(entry: dict[str, Any]) -> Any:
    """A stored entry with the keys failure_phrase reads, whatever an old or hand-made row lacks."""
    return {"ended": "", "error_class": "", "message": "", **entry}


def _payload(dead: DeadLetter) -> dict[str, Any]:
    shown = redacted_payload(dead.task_name, dead.args, dead.kwargs)
    if shown.failed or shown.undecodable:
        return {"payload": "hidden"}
    return {"args": shown.args, "kwargs": shown.kwargs, "payload_redacted": shown.redacted}
