"""Failure fingerprints: which dead letters (and retrying jobs) failed the same way.

After an outage an operator needs a list of problems, not of rows: 38,000
``PartnerTimeout`` and 12 ``KeyError`` are two groups. A fingerprint is
computed by the database, by the IMMUTABLE SQL function
``jobretry_fingerprint(errors, task_name, error_class, message)`` (created
by migration 0022_failure_fingerprints, with the trigger that fills
DeadLetter.fingerprint; their current text is in jobs/functions.sql), from
the last attempt entry:

- the task's own fingerprint, when its exception carried a ``fingerprint``
  attribute (stored in the entry, jobs/history.py);
- otherwise, for an attempt that ended without an exception (lease expired,
  timeout, shutdown, cancel), the task and how it ended;
- otherwise the task, the error class and the message with each quoted
  string, UUID, hex run and number replaced by ``?``
  (``jobretry_error_pattern``), of its first 1,000 characters:
  ``order 1234 for 'acme' timed out after 30.5 s`` is
  ``order ? for ? timed out after ? s``.

The result is 16 hex digits (the start of an md5): safe in a URL and an
index. Dead letters store theirs (FingerprintField); a job's is computed
when read (JobFingerprint), so the hot jobs table pays nothing.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from django.db import models

if TYPE_CHECKING:  # generic only in django-stubs, not at run time
    _CharField = models.CharField[str, str]
else:
    _CharField = models.CharField

#: Length of a fingerprint: 64 bits of md5, hex.
LENGTH = 16

_SHAPE = re.compile(rf"[0-9a-f]{{{LENGTH}}}")


class FingerprintField(_CharField):
    """DeadLetter.fingerprint: written by the trigger ``jobretry_dead_fingerprint``, read back on insert.

    Not a GeneratedField: Django's system checks of one ask the database
    for its version, so every management command (``showpolicies`` too)
    would need a reachable database. The trigger sets the column on every
    INSERT (the burial statements', Django's, an import's) and on an UPDATE
    of the columns it reads; whatever the INSERT gave is overwritten.
    ``db_returning`` gives a saved instance the database's value.
    """

    db_returning = True

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", LENGTH)
        kwargs.setdefault("editable", False)
        kwargs.setdefault("default", "")
        kwargs.setdefault("db_default", "")
        super().__init__(**kwargs)


class JobFingerprint(models.Func):
    """``jobretry_fingerprint(errors, task_name)``: a job's, of its last attempt entry, computed when read.

    ``Job.objects.annotate(fingerprint=JobFingerprint())``; NULL-free: a job
    that never failed gets the fingerprint of an empty history.
    """

    function = "jobretry_fingerprint"
    output_field = models.CharField(max_length=LENGTH)

    def __init__(self) -> None:
        super().__init__(models.F("errors"), models.F("task_name"))


class ErrorPattern(models.Func):
    """``jobretry_error_pattern(message)``: the message as its fingerprint sees it."""

    function = "jobretry_error_pattern"
    output_field = models.TextField()


def check_fingerprint(value: object) -> str:
    """``value`` if it is a fingerprint (LENGTH lowercase hex digits), else ValueError saying so."""
    if not isinstance(value, str) or _SHAPE.fullmatch(value) is None:
        raise ValueError(
            f"fingerprint {value!r} is invalid: {LENGTH} hex digits, as `manage.py deadletters groups` prints"
        )
    return value
