"""Trace ids on the job and dead-letter pages, linked to ``JOBRETRY["TRACE_URL"]`` (docs/tracing.md).

Two kinds: each failed attempt's, from its history entry, and the
enqueue's, parsed from the W3C ``traceparent`` stored on the job (and
carried into its dead letter and requeued jobs). A row may hold anything:
only a well-formed trace id is shown or put in a URL; anything else a row
holds is shown as nothing, never echoed. Trace ids are no payload: whoever
may view the row sees them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from django_jobretry.conf import jobretry_settings
from django_jobretry.models import DeadLetter, Job
from django_jobretry.services.tracing import stored_context

#: A trace id as OpenTelemetry writes it: 32 lowercase hex digits.
TRACE_ID = re.compile(r"[0-9a-f]{32}")
#: A W3C ``traceparent`` of version 00: version, trace id, parent (span) id, flags; lowercase hex only.
TRACEPARENT = re.compile(r"00-(?P<trace_id>[0-9a-f]{32})-(?P<span_id>[0-9a-f]{16})-(?P<flags>[0-9a-f]{2})")
#: All zeros: the W3C's invalid trace id and span id, which no tracer writes.
INVALID_TRACE_ID = "0" * 32
INVALID_SPAN_ID = "0" * 16
#: The W3C flags' "sampled" bit: the enqueuing process recorded that trace.
SAMPLED = 0x01


def link(value: Any) -> dict[str, str]:
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

    A requeue copies the stored context (services/sql.py CARRIED_COLUMNS):
    a requeued job's is its first enqueue's, never the requeue's. An
    enqueue made in a span its process did not sample stores a context
    all the same (flags 00): its backend most likely holds none of it.
    """
    found = _traceparent(row.trace_context)
    if found is None:
        return ""
    context = {
        **link(found["trace_id"]),
        "requeued": bool(row.requeue_count),
        "sampled": bool(int(found["flags"], 16) & SAMPLED),
    }
    return render_to_string("admin/django_jobretry/includes/enqueue_trace.html", context)


def _traceparent(stored: Any) -> re.Match[str] | None:
    """A stored context's well-formed version-00 ``traceparent``, or None.

    Read as the worker reads it (services/tracing.py: a small object of
    strings), but only from an object: a string here is a JSON string or
    the text of a value too deep to decode, neither of them a context.
    """
    headers = stored_context(stored) if isinstance(stored, Mapping) else None
    found = TRACEPARENT.fullmatch(headers["traceparent"]) if headers else None
    if found is None or found["trace_id"] == INVALID_TRACE_ID or found["span_id"] == INVALID_SPAN_ID:
        return None
    return found
