"""HTML renderings shared by the admin's pages: histories, arguments, times, trace ids.

Histories are stored as JSON lists; shown raw they are unreadable at 3 a.m.,
so they become tables. Arguments may hold personal data: they are shown only
to holders of ``view_job_payload`` and always pass the project's redactor
(django_jobretry.display.redaction).

Times are shown in local time to the second: the precision of the worker's
log lines an operator lines a row up with (Django's default DATETIME_FORMAT
stops at the minute). Every stored time is one Python can hold: the tables
refuse any other (models/instants.py), so the admin reads the columns as
they are.

Trace ids are linked to ``JOBRETRY["TRACE_URL"]`` (docs/tracing.md). Two
kinds: each failed attempt's, from its history entry, and the enqueue's,
parsed from the W3C ``traceparent`` stored on the job (and carried into its
dead letter and requeued jobs). A row may hold anything: only a well-formed
trace id is shown or put in a URL; anything else a row holds is shown as
nothing, never echoed. Trace ids are no payload: whoever may view the row
sees them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime, timedelta
from typing import Any

from django.contrib import admin
from django.db import models
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from django_jobretry.conf import jobretry_settings
from django_jobretry.display import humanize_age, humanize_delay
from django_jobretry.display.redaction import redacted_payload
from django_jobretry.jobs.tracing import stored_context
from django_jobretry.models import DeadLetter, Job
from django_jobretry.models.instants import EARLIEST, LATEST

#: "app_label.codename" of the right to see arguments (Job.Meta.permissions).
PAYLOAD_PERMISSION = "django_jobretry.view_job_payload"
#: The view rights, for links from one admin to the other.
VIEW_JOB = "django_jobretry.view_job"
VIEW_DEAD_LETTER = "django_jobretry.view_deadletter"
#: The permission's human name, so the hint always matches what the user admin shows.
PAYLOAD_PERMISSION_NAME = dict(Job._meta.permissions)["view_job_payload"]
#: A trace id as OpenTelemetry writes it: 32 lowercase hex digits.
TRACE_ID = re.compile(r"[0-9a-f]{32}")
#: A W3C ``traceparent`` of version 00: version, trace id, parent (span) id, flags; lowercase hex only.
TRACEPARENT = re.compile(r"00-(?P<trace_id>[0-9a-f]{32})-(?P<span_id>[0-9a-f]{16})-(?P<flags>[0-9a-f]{2})")
#: All zeros: the W3C's invalid trace id and span id, which no tracer writes.
INVALID_TRACE_ID = "0" * 32
INVALID_SPAN_ID = "0" * 16
#: The W3C flags' "sampled" bit: the enqueuing process recorded that trace.
SAMPLED = 0x01


def first_line(text: str, limit: int = 120) -> str:
    """The first non-empty line of ``text``, cut to ``limit`` characters for list columns."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def error_summary(error_class: str, message: str, limit: int = 120) -> SafeString:
    """A list's last-error cell: the error's class name, then its message's first line.

    The class is shown by its own name (the dotted path is in the tooltip):
    in a narrow column "PartnerTimeout" says more than the module it lives in.
    """
    line = first_line(message, limit)
    if not error_class:
        return format_html("{}", line)
    name = error_class.rsplit(".", 1)[-1]
    tag = format_html('<span class="jobretry-error-class" title="{}">{}</span>', error_class, name)
    return format_html("{}: {}", tag, line) if line else tag


def task_cell(task_name: str, *notes: str) -> SafeString:
    """A list's task cell: the function name first, its module and ``notes`` (the queue) below, quieter.

    The full dotted path in one line is the widest thing in a row; split like
    this the column stays narrow and the name an operator looks for comes first.
    """
    module, _, name = task_name.rpartition(".")
    below = [part for part in (breakable(module) if module else "", *notes) if part]
    return format_html(
        '<span class="jobretry-task-name">{}</span>{}',
        breakable(name, "_"),
        format_html_join("", '<span class="jobretry-quiet">{}</span>', ((part,) for part in below)),
    )


def breakable(text: str, separator: str = ".") -> SafeString:
    """``text`` that may wrap after each ``separator``, so long names leave room in narrow columns."""
    joint = format_html("{}<wbr>", separator)
    return format_html_join(joint, "{}", ((part,) for part in text.split(separator)))


def _when(value: Any) -> Any:
    """History timestamps are ISO strings in JSON; shown in local time to the second, like the columns.

    A row may hold anything: a string that is no date (February 30 included)
    or a date the local time zone cannot show is shown as the text it is.
    """
    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
    except ValueError:  # well formed, but no such date
        return value
    if parsed is None:
        return value
    if timezone.is_naive(parsed):  # written by hand, without a zone: shown as written
        return parsed.strftime("%Y-%m-%d %H:%M:%S")
    if not EARLIEST <= parsed <= LATEST:
        return value
    return time_text(parsed)


def _delay(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return humanize_delay(timedelta(seconds=value))
        except (OverflowError, ValueError):  # beyond timedelta's range
            return str(value)
    return ""


def _text(value: Any) -> str:
    """A history value shown as text: a row may hold anything, a string is shown as it is."""
    return value if isinstance(value, str) else ""


def last_rule(errors: Any) -> str:
    """The rule that classified the last attempt's error (its history entry's ``rule``), or ""."""
    last = errors[-1] if isinstance(errors, list) and errors else None
    return _text(last.get("rule")) if isinstance(last, dict) else ""


def attempt_history(errors: Any, attempts: int) -> SafeString:
    """The attempt history as a table, oldest first; tracebacks fold away.

    The message gets the room: the error class is shown by its own name (the
    dotted path in the tooltip), the worker rides under the time and the kind
    under how the attempt ended, and the rule that classified the error under
    the message.
    """
    entries = [
        {
            "attempt": entry.get("attempt", ""),
            "at": _when(entry.get("at")),
            "ended": entry.get("ended", ""),
            "kind": entry.get("kind", ""),
            "rule": _text(entry.get("rule")),
            "error_class": _text(entry.get("error_class")),
            "error_name": _text(entry.get("error_class")).rsplit(".", 1)[-1],
            "message": entry.get("message", ""),
            "traceback": entry.get("traceback", ""),
            "delay": _delay(entry.get("delay")),
            "worker": breakable(_text(entry.get("worker")), ":"),
            **trace_link(entry.get("trace_id")),
        }
        for entry in (errors if isinstance(errors, list) else [])
        if isinstance(entry, dict)
    ]
    # ERROR_HISTORY_LIMIT keeps the latest entries; say so when some were dropped.
    recorded = max((e["attempt"] for e in entries if isinstance(e["attempt"], int)), default=0)
    dropped = max(min(attempts, recorded) - len(entries), 0)
    return render_to_string(
        "admin/django_jobretry/includes/attempts.html", {"entries": entries, "dropped": dropped}
    )


def requeue_history(history: Any) -> SafeString:
    """Where this job came from: one row per earlier death and requeue."""
    entries = [
        {
            **entry,
            "at": _when(entry.get("at")),
            "dead_at": _when(entry.get("dead_at")),
            # How many arguments a repair changed; which, and how, only in the Arguments section.
            "repaired": len(entry["repair"].get("changes", []))
            if isinstance(entry.get("repair"), dict)
            else None,
        }
        for entry in (history if isinstance(history, list) else [])
        if isinstance(entry, dict)
    ]
    return render_to_string("admin/django_jobretry/includes/requeues.html", {"entries": entries})


def can_view_payload(request: HttpRequest) -> bool:
    """Whether this user may see job arguments at all (before redaction)."""
    return request.user.has_perm(PAYLOAD_PERMISSION)


def can_filter_payload(request: HttpRequest) -> bool:
    """Whether URL filters on arguments are allowed: only to those who see them unredacted.

    A filter answers "does any row match?", so it reads values one character
    at a time: with a PAYLOAD_REDACTOR configured, even permitted users would
    read what it hides.
    """
    return can_view_payload(request) and jobretry_settings.payload_redactor is None


def payload(request: HttpRequest, task_name: str, args: Any, kwargs: Any) -> SafeString:
    """Arguments as pretty JSON for permitted users, after PAYLOAD_REDACTOR; else a hint."""
    context: dict[str, Any] = {"permission_name": PAYLOAD_PERMISSION_NAME}
    if not can_view_payload(request):
        context["hidden"] = True
        return render_to_string("admin/django_jobretry/includes/payload.html", context)
    shown = redacted_payload(task_name, args, kwargs)
    if shown.failed:
        context["redactor_failed"] = shown.failed
        return render_to_string("admin/django_jobretry/includes/payload.html", context)
    if shown.undecodable:
        context["undecodable"] = True
        return render_to_string("admin/django_jobretry/includes/payload.html", context)
    context["args"] = json.dumps(shown.args, indent=2, ensure_ascii=False, default=str)
    context["kwargs"] = json.dumps(shown.kwargs, indent=2, ensure_ascii=False, default=str, sort_keys=True)
    context["redacted"] = shown.redacted
    return render_to_string("admin/django_jobretry/includes/payload.html", context)


# --- times, to the second ---------------------------------------------------------------------------


def time_text(value: datetime | None) -> str:
    """A time as text: local time to the second; "" for None."""
    return "" if value is None else timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S")


def time_html(value: datetime | None) -> SafeString | str:
    """:func:`time_text`, marked up so a narrow column may wrap between date and time, never inside."""
    if value is None:
        return ""
    day, time = time_text(value).split(" ")
    return format_html(
        '<span class="jobretry-date">{}</span> <span class="jobretry-time">{}</span>', day, time
    )


def clock(value: datetime | None, *, today: date | None = None) -> str:
    """The time alone when ``value`` falls on ``today`` (local), else the full :func:`time_text`."""
    if value is not None and timezone.localtime(value).date() == (today or timezone.localdate()):
        return timezone.localtime(value).strftime("%H:%M:%S")
    return time_text(value)


def time_column(name: str, *, sortable: bool = False) -> Callable[[Any, models.Model], SafeString | str]:
    """An admin column or detail field showing ``name`` to the second, labelled like the field."""

    def show(model_admin: Any, obj: models.Model) -> SafeString | str:
        return time_html(getattr(obj, name))

    show.__name__ = f"{name}_shown"
    return admin.display(description=name.replace("_", " "), ordering=name if sortable else None)(show)


def time_help_texts(model: type[models.Model]) -> dict[str, str]:
    """The fields' help texts, keyed by the names of their :func:`time_column` stand-ins."""
    return {
        f"{field.name}_shown": str(field.help_text)
        for field in model._meta.concrete_fields
        if isinstance(field, models.DateTimeField) and field.help_text
    }


def since(moment: datetime | None, now: datetime) -> tuple[SafeString | str, str]:
    """A time to the second (wrapping between date and time only) and its age ("1h04m05s"); "" for None."""
    if moment is None:
        return "", ""
    return time_html(moment), humanize_age(max(now - moment, timedelta(0)))


def since_html(moment: datetime | None, now: datetime) -> SafeString | str:
    """:func:`since` in one cell, the age below the time ("1h04m05s ago"); "-" for None."""
    if moment is None:
        return "-"
    return format_html('{}<span class="jobretry-quiet">{} ago</span>', *since(moment, now))


# --- trace ids ----------------------------------------------------------------------------------------


def trace_link(value: Any) -> dict[str, str]:
    """A trace id and its page at TRACE_URL (or "" when none is set); {} when ``value`` is no trace id."""
    if not isinstance(value, str) or not TRACE_ID.fullmatch(value) or value == INVALID_TRACE_ID:
        return {}
    url = jobretry_settings.trace_url
    return {"trace_id": value, "trace_url": url.format(trace_id=value) if url else ""}


def enqueue_trace_id(stored: Any) -> str:
    """The trace id of a stored trace context's ``traceparent``, or "" when it is not a well-formed one."""
    found = _traceparent(stored)
    return found["trace_id"] if found else ""


def enqueue_trace(row: Job | DeadLetter) -> SafeString | str:
    """The enqueue's trace id, linked when TRACE_URL is set, and what it is the trace of; "" without one.

    A requeue copies the stored context (jobs/sql.py CARRIED_COLUMNS):
    a requeued job's is its first enqueue's, never the requeue's. An
    enqueue made in a span its process did not sample stores a context
    all the same (flags 00): its backend most likely holds none of it.
    """
    found = _traceparent(row.trace_context)
    if found is None:
        return ""
    context = {
        **trace_link(found["trace_id"]),
        "requeued": bool(row.requeue_count),
        "sampled": bool(int(found["flags"], 16) & SAMPLED),
    }
    return render_to_string("admin/django_jobretry/includes/enqueue_trace.html", context)


def _traceparent(stored: Any) -> re.Match[str] | None:
    """A stored context's well-formed version-00 ``traceparent``, or None.

    Read as the worker reads it (jobs/tracing.py: a small object of
    strings), but only from an object: a string here is a JSON string or
    the text of a value too deep to decode, neither of them a context.
    """
    headers = stored_context(stored) if isinstance(stored, Mapping) else None
    found = TRACEPARENT.fullmatch(headers["traceparent"]) if headers else None
    if found is None or found["trace_id"] == INVALID_TRACE_ID or found["span_id"] == INVALID_SPAN_ID:
        return None
    return found
