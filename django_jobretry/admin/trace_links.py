"""Trace ids on the job and dead-letter pages, linked to ``JOBRETRY["TRACE_URL"]`` (docs/tracing.md).

A row may hold anything: only a well-formed trace id is shown or put in a
URL; anything else a row holds is shown as nothing, never echoed.
"""

from __future__ import annotations

import re
from typing import Any

from django_jobretry.conf import jobretry_settings

#: A trace id as OpenTelemetry writes it: 32 lowercase hex digits.
TRACE_ID = re.compile(r"[0-9a-f]{32}")


def link(value: Any) -> dict[str, str]:
    """A trace id and its page at TRACE_URL (or "" when none is set); {} when ``value`` is no trace id."""
    if not isinstance(value, str) or not TRACE_ID.fullmatch(value):
        return {}
    url = jobretry_settings.trace_url
    return {"trace_id": value, "trace_url": url.format(trace_id=value) if url else ""}
