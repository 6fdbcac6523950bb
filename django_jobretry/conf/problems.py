"""One thing wrong with JOBRETRY, as the settings validator reports it and the checks show it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with JOBRETRY: a stable check id, what, and how to fix it."""

    id: str
    msg: str
    hint: str
