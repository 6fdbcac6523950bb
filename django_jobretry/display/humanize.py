"""Human-readable renderings shared by the commands, the admin, the worker's log lines and testing."""

from __future__ import annotations

from datetime import timedelta


def humanize_delay(delay: timedelta) -> str:
    """Compact, sortable-looking durations: 250ms, 15s, 2m30s, 1h04m, 3d02h."""
    seconds = delay.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s".replace(".0s", "s")
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def humanize_age(delay: timedelta) -> str:
    """An age to the second at every scale, for "held since" and the like: 45s, 4m05s, 1h04m05s, 3d02h04m05s.

    :func:`humanize_delay` rounds an hour or more to the minute, fine for a
    policy's delays; an operator lining a hold up with the log lines wants the second.
    """
    seconds = max(round(delay.total_seconds()), 0)
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h{minutes:02d}m{secs:02d}s"
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def count_of(count: int, noun: str, plural: str | None = None) -> str:
    """'1 attempt', '3 attempts', '0 attempts': a count with its noun agreeing."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
