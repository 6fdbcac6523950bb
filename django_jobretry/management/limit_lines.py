"""The Limits section of `jobstatus`: running / limit and held per declared limit, and its JSON."""

from __future__ import annotations

from typing import Any

from django_jobretry.display.terminal import printable
from django_jobretry.services.console.status_limits import LimitLine


def status_lines(lines: list[LimitLine]) -> list[str]:
    """The Limits section, one line per declared limit; none when no limit is declared."""
    if not lines:
        return []
    out = ["Limits (running / limit, due jobs held):"]
    for line in lines:
        name = printable(line.name, one_line=True)
        limit = "-" if line.concurrency is None else str(line.concurrency)
        text = f"  {line.kind} {name}: {line.running} / {limit}{' per key' if line.per_key else ''}"
        text += f", {line.held} held"
        if line.rate:
            text += f", rate {line.rate}"
        if line.per_key:
            text += f"; {line.keys_running} keys running, {line.keys_held} waiting"
            if line.top_keys:
                busiest = ", ".join(f"{printable(key, one_line=True)} ({n})" for key, n in line.top_keys)
                text += f" (most waiting: {busiest})"
        out.append(text)
    return out


def as_json(lines: list[LimitLine]) -> list[dict[str, Any]]:
    """Each line's fields; ``waiting_since`` in ISO 8601 with its offset (null when nothing waits)."""
    return [
        {
            **vars(line),
            "top_keys": [list(pair) for pair in line.top_keys],
            "waiting_since": line.waiting_since.isoformat() if line.waiting_since else None,
        }
        for line in lines
    ]
