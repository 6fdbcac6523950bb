"""' Did you mean ...?' for a name close to a known one: settings, checks, queues, policies.

Kept apart from the settings schema, so that exceptions (which suggest a
policy name) can use it without importing the settings package.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(names: Iterable[str], known: Iterable[str], *, prefix: str = "") -> str:
    """' Did you mean ...?' for names close to a known one, or '' (for messages and hints).

    ``prefix`` is put before each suggestion: a module path before a class name, say.
    """
    choices = sorted(known)
    close = [
        f"{prefix + match!r}"
        for name in names
        for match in difflib.get_close_matches(str(name), choices, n=1)
    ]
    return f" Did you mean {', '.join(dict.fromkeys(close))}?" if close else ""
