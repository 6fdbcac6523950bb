"""The one way job arguments are prepared for a human: the admin and the CLI.

Arguments may hold personal data. Before anyone sees them they pass the
project's ``PAYLOAD_REDACTOR`` (if configured), which gets copies, so it can
never change what is stored or cached. A redactor that raises hides the
arguments (fail closed) rather than showing what it was meant to hide; the
log line names the task and the error class, never an argument.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import Any

from django_jobretry.conf import jobretry_settings

logger = logging.getLogger("django_jobretry")


@dataclass(frozen=True)
class Payload:
    """Arguments ready to show, or (``failed`` set) why they are hidden."""

    args: Any
    kwargs: Any
    #: Class name of the exception the redactor raised; the arguments are None then.
    failed: str | None = None
    #: Whether a redactor was applied.
    redacted: bool = False
    #: The stored arguments could not be decoded (models/fields.py): not shown.
    undecodable: bool = False


def redacted_payload(task_name: str, args: Any, kwargs: Any) -> Payload:
    """``args`` and ``kwargs`` through PAYLOAD_REDACTOR, as copies."""
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        # The raw text of a value Python could not decode: no redactor can read it.
        return Payload(None, None, undecodable=True)
    redactor = jobretry_settings.payload_redactor
    if redactor is None:
        return Payload(copy.deepcopy(args), copy.deepcopy(kwargs))
    try:
        shown_args, shown_kwargs = redactor(task_name, copy.deepcopy(list(args)), copy.deepcopy(dict(kwargs)))
    except Exception as exc:
        logger.warning(
            "PAYLOAD_REDACTOR failed for a %s job: %s",
            task_name,
            type(exc).__name__,
            extra={"task": task_name, "outcome": "redactor_failed", "error_class": type(exc).__name__},
        )
        return Payload(None, None, failed=type(exc).__name__, redacted=True)
    return Payload(shown_args, shown_kwargs, redacted=True)
