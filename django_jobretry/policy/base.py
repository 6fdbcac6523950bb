"""The root of every django-jobretry exception, and the policy's validation error.

It imports nothing, so every module - durations, the handler errors, the
Django layer - can build on it without an import cycle.
"""

from __future__ import annotations


class JobRetryError(Exception):
    """Base class of every django-jobretry exception; do not raise it directly."""


class InvalidPolicy(JobRetryError, ValueError):
    """A retry policy parameter is out of range or of the wrong type.

    ``field``, ``value`` and ``allowed`` let callers (system checks, admin
    forms) point at the exact mistake instead of re-parsing the message.
    """

    def __init__(self, field: str, value: object, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}={value!r} is invalid: {allowed}")
