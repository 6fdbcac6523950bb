"""How the policy tests read an InvalidPolicy: its field, value and allowed, and the message of the three.

The system checks build their messages from the three attributes, so the
tests pin each of them exactly rather than match the text loosely.
"""

from __future__ import annotations

from django_jobretry.policy import InvalidPolicy

#: What every duration parameter that is not a number of seconds or a timedelta is told.
NOT_SECONDS = "expected seconds (int or float) or a timedelta"


def check_invalid(error: InvalidPolicy, field: str, value: object, allowed: str) -> None:
    """The three attributes and the message built from them."""
    assert (error.field, repr(error.value), error.allowed) == (field, repr(value), allowed)
    assert str(error) == f"{field}={value!r} is invalid: {allowed}"
