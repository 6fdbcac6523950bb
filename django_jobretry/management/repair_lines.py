"""How `deadletters show` prints a repair recorded in a requeue history (services/repairs.py).

The changes hold argument values, so they follow the arguments: printed
when no PAYLOAD_REDACTOR is configured, and reduced to which argument
changed how when one is (a redactor cannot be applied to a diff), in the
text and the ``--json`` output alike.
"""

from __future__ import annotations

import json
from typing import Any

from django_jobretry.conf import jobretry_settings
from django_jobretry.display.terminal import printable


def _private() -> bool:
    return jobretry_settings.payload_redactor is not None


def shown_history(history: Any) -> Any:
    """The requeue history for ``--json``: repairs without their values when a redactor is configured."""
    if not _private() or not isinstance(history, list):
        return history
    return [_without_values(entry) for entry in history]


def _without_values(entry: Any) -> Any:
    if not isinstance(entry, dict) or not isinstance(entry.get("repair"), dict):
        return entry
    changes = [
        {key: value for key, value in change.items() if key not in ("old", "new")}
        for change in entry["repair"].get("changes", [])
        if isinstance(change, dict)
    ]
    return {**entry, "repair": {**entry["repair"], "changes": changes, "values_hidden": True}}


def repair_lines(entry: dict[str, Any]) -> list[str]:
    """The lines under a requeue that repaired the arguments first; none for a plain requeue."""
    repair = entry.get("repair")
    if not isinstance(repair, dict):
        return []
    changes = [c for c in repair.get("changes", []) if isinstance(c, dict)]
    lines = [f"     arguments repaired by {repair.get('by') or '?'}: {len(changes)} change(s)"]
    lines += [f"       {change_line(change, values=not _private())}" for change in changes]
    return lines


def change_line(change: dict[str, Any], *, values: bool = True) -> str:
    """``kwargs['email'] changed: "a@" -> "a@example.com"``: one change of a repair, on one line."""
    line = f"{change.get('path', '?')} {change.get('change', '?')}"
    if values:
        old = json.dumps(change["old"], sort_keys=True) if "old" in change else "-"
        new = json.dumps(change["new"], sort_keys=True) if "new" in change else "-"
        line += f": {old} -> {new}"
    return printable(line, one_line=True)
