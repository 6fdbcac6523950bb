"""The settings that connect django-jobretry to other services: the metrics token, LISTEN, the trace URL.

Each is checked here for ``validate()`` (conf/schema.py), so ``manage.py
check`` and the lazy settings report the same problems.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

from django_jobretry.conf.problems import Problem

#: A metrics token shorter than this is guessable (a 128-bit secret is 22+ characters).
METRICS_TOKEN_MIN_CHARS = 16
#: The one field a trace URL fills in.
TRACE_FIELD = "trace_id"
TRACE_URL_EXAMPLE = 'e.g. JOBRETRY["TRACE_URL"] = "https://grafana.example.com/explore?traceId={trace_id}"'


def service_problems(raw: Mapping[str, Any]) -> list[Problem]:
    """Every problem of METRICS_TOKEN, LISTEN, LISTEN_DATABASE and TRACE_URL."""
    problems = _listen_problems(raw)
    if raw.get("METRICS_TOKEN") is not None and (p := _token_problem(raw["METRICS_TOKEN"])):
        problems.append(p)
    if raw.get("TRACE_URL") is not None and (p := _trace_url_problem(raw["TRACE_URL"])):
        problems.append(p)
    return problems


def _trace_url_problem(url: object) -> Problem | None:
    """An http(s) URL whose one field is ``{trace_id}``: the admin fills in 32 hex digits, nothing else."""
    fields: list[str | None] = []
    if isinstance(url, str):
        try:
            fields = [field for _, field, _, _ in string.Formatter().parse(url) if field is not None]
        except ValueError:  # an unmatched brace
            fields = []
    if isinstance(url, str) and url.startswith(("https://", "http://")) and fields == [TRACE_FIELD]:
        return None
    return Problem(
        "E016",
        f'JOBRETRY["TRACE_URL"] = {url!r} is invalid: expected an http(s) URL with "{{{TRACE_FIELD}}}" '
        "as its one field, or None.",
        TRACE_URL_EXAMPLE,
    )


def _token_problem(token: object) -> Problem | None:
    """A token the view could compare safely: a string of printable, non-space characters, long enough."""
    if not isinstance(token, str):
        shown = f"a {type(token).__name__}"
    elif len(token) < METRICS_TOKEN_MIN_CHARS:
        shown = f"{len(token)} characters"
    elif not token.isprintable() or any(char.isspace() for char in token):
        shown = "a string with spaces or unprintable characters"
    else:
        return None
    return Problem(
        "E010",
        f'JOBRETRY["METRICS_TOKEN"] must be a string of at least {METRICS_TOKEN_MIN_CHARS} printable '
        f"characters without spaces, or None; got {shown}.",
        'e.g. JOBRETRY["METRICS_TOKEN"] = os.environ["JOBRETRY_METRICS_TOKEN"], made with '
        "python -c 'import secrets; print(secrets.token_urlsafe(32))'",
    )


def _listen_problems(raw: Mapping[str, Any]) -> list[Problem]:
    """LISTEN is a bool; LISTEN_DATABASE None or an alias (whether DATABASES has it: pooling.py)."""
    problems = []
    if not isinstance(raw.get("LISTEN", True), bool):
        msg = f'JOBRETRY["LISTEN"] = {raw["LISTEN"]!r} is invalid: expected True or False.'
        problems.append(Problem("E012", msg, "False: workers never LISTEN and poll every POLL_SECONDS."))
    alias = raw.get("LISTEN_DATABASE")
    if alias is not None and (not isinstance(alias, str) or not alias):
        msg = f'JOBRETRY["LISTEN_DATABASE"] = {alias!r} is invalid: expected the name of a DATABASES alias.'
        problems.append(Problem("E012", msg, _LISTEN_HINT))
    return problems


_LISTEN_HINT = (
    'e.g. JOBRETRY["LISTEN_DATABASE"] = "direct", a DATABASES entry that connects to PostgreSQL '
    "without PgBouncer's transaction pooling, which delivers no notifications "
    "(python -m pydoc django_jobretry.conf.pooling says why)."
)
