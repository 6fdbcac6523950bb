"""What PostgreSQL can take from an operator's input: text and JSON values checked before any query.

An enqueue checks much more (validation.py: every argument must come back
from jsonb unchanged). A value typed into a search, a form or a command
line only has to be one PostgreSQL accepts, or the statement fails with a
``DataError`` or an encoding error - a server error, or a traceback - instead
of the clear refusal every other bad input gets: no NUL character and no
lone surrogate (what a name that is not UTF-8 becomes on a command line) in
a string or key, no NaN or infinity (``json.loads`` reads ``NaN`` and
``1e400``), and no nesting deeper than a limit (Django's lookups recurse
into nested lists). Iterative, so the check cannot itself recurse.
"""

from __future__ import annotations

import math
from typing import Any

from django_jobretry.exceptions import InvalidJob
from django_jobretry.validation import check_text

__all__ = ["check_json", "check_text", "is_text"]


def is_text(text: str) -> bool:
    """Whether PostgreSQL can take ``text``: no NUL, no lone surrogate (what argv that is not UTF-8 holds)."""
    try:
        check_text("text", text)
    except InvalidJob:
        return False
    return True


def check_json(subject: str, value: Any, *, max_depth: int) -> None:
    """Refuse ``value`` (as ``json.loads`` returns it) if jsonb would; InvalidJob names ``subject``.

    Depth counts as in validation.py: ``value`` is level 1, and a non-empty
    list or object at level ``max_depth`` is one level too deep.
    """
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if item and depth >= max_depth:
                raise InvalidJob(f"{subject} is nested deeper than {max_depth} levels")
            if isinstance(item, dict):
                for key in item:
                    check_text(f"a key in {subject}", str(key))
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidJob(f"{subject} holds {item!r}: PostgreSQL's jsonb has no NaN or infinity")
        elif isinstance(item, str):
            check_text(subject, item)
