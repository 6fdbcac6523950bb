"""One thing wrong with JOBRETRY (:class:`Problem`), and the settings whose checks need more than a type.

The settings validator (schema.py ``validate()``) reports Problems and the
system checks show them, each with a stable id. Two groups of settings are
checked here, below the schema, which calls them:

- A policy's lists of exception classes (``fatal_errors``,
  ``retryable_errors``): imported and checked (E006). Importing user code
  has its own failure modes: a module that does not import, a name that is
  not an exception class, a misspelt class that a close one in the same
  module suggests.
- MIDDLEWARE: a list of dotted paths, each imported and checked callable
  (E017-E019), so a worker never starts with a chain it cannot build.
- The settings that connect django-jobretry to other services: the metrics
  token, LISTEN, the trace URL; so ``manage.py check`` and the lazy settings
  report the same problems.
"""

from __future__ import annotations

import importlib
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.utils.module_loading import import_string

from django_jobretry.display import did_you_mean


@dataclass(frozen=True)
class Problem:
    """One thing wrong with JOBRETRY: a stable check id, what, and how to fix it."""

    id: str
    msg: str
    hint: str


_IMPORT_HINT = "Give the dotted path of an exception class, e.g. 'smtplib.SMTPRecipientsRefused'."


def import_error_classes(where: str, key: str, paths: object) -> tuple[list[type], list[Problem]]:
    """The exception classes a policy's ``fatal_errors``/``retryable_errors`` name; E006 for each bad one."""
    if isinstance(paths, str) or not isinstance(paths, list | tuple):
        msg = f'{where}["{key}"] must be a list of dotted paths to exception classes, got {paths!r}.'
        return [], [Problem("E006", msg, 'e.g. ["smtplib.SMTPRecipientsRefused"]')]
    classes: list[type] = []
    problems: list[Problem] = []
    for path in paths:
        try:
            klass = import_string(path) if isinstance(path, str) else path
        except Exception as exc:  # a module failing to import for any reason is E006
            msg = f'{where}["{key}"]: cannot import {path!r} ({type(exc).__name__}: {exc}).'
            problems.append(Problem("E006", msg + _close_exception_classes(path), _IMPORT_HINT))
            continue
        if not (isinstance(klass, type) and issubclass(klass, BaseException)):
            msg = f'{where}["{key}"]: {path!r} is not an exception class.'
            problems.append(Problem("E006", msg, _IMPORT_HINT))
            continue
        classes.append(klass)
    return classes, problems


def _close_exception_classes(path: str) -> str:
    """' Did you mean ...?' for an exception class of the same module close to the missing name, or ''."""
    module_path, _, name = path.rpartition(".")
    try:
        module = importlib.import_module(module_path)
    except Exception:  # the module itself does not import: nothing to suggest from
        return ""
    known = {
        attribute
        for attribute, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    return did_you_mean([name], known, prefix=f"{module_path}.")


MIDDLEWARE_EXAMPLE = 'e.g. JOBRETRY["MIDDLEWARE"] = ["myproject.jobs.tenant_middleware"]'


def middleware_problems(paths: object) -> list[Problem]:
    """MIDDLEWARE is a list of strings (E017), each importable (E018) and callable (E019)."""
    if isinstance(paths, str) or not isinstance(paths, list | tuple):
        msg = f'JOBRETRY["MIDDLEWARE"] = {paths!r} is invalid: expected a list of dotted paths to callables.'
        return [Problem("E017", msg, MIDDLEWARE_EXAMPLE)]
    problems: list[Problem] = []
    for path in paths:
        if not isinstance(path, str):
            msg = f'JOBRETRY["MIDDLEWARE"]: {path!r} is not a string: expected a dotted path to a callable.'
            problems.append(Problem("E017", msg, MIDDLEWARE_EXAMPLE))
            continue
        try:
            middleware = import_string(path)
        except Exception as exc:  # any import failure is a configuration problem
            msg = f'JOBRETRY["MIDDLEWARE"]: cannot import {path!r} ({type(exc).__name__}: {exc}).'
            problems.append(Problem("E018", msg, MIDDLEWARE_EXAMPLE))
            continue
        if not callable(middleware):
            msg = (
                f'JOBRETRY["MIDDLEWARE"]: {path!r} is a {type(middleware).__name__}, not a callable: '
                "expected middleware(job, call_next)."
            )
            problems.append(Problem("E019", msg, MIDDLEWARE_EXAMPLE))
    return problems


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
    """LISTEN is a bool; LISTEN_DATABASE None or an alias (whether DATABASES has it: databases.py)."""
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
    "(python -m pydoc django_jobretry.conf.databases says why)."
)
