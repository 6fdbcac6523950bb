"""How values are shown to people: durations and counts in words, "did you mean", terminal-safe text.

One module for the small renderings every face shares (the commands, the
admin, the worker's log lines, the checks and testing). It imports nothing
of the package, so the settings, the exceptions and the policy can use it
without an import cycle; redacting arguments reads the settings, so it lives
apart (display/redaction.py).

- Durations and counts in words: :func:`humanize_delay`, :func:`humanize_age`, :func:`count_of`,
  :func:`progress_words`.
- :func:`did_you_mean` for a name close to a known one: settings, checks, queues, policies.
- Text from the database, made safe to print on an operator's terminal, alone
  (:func:`printable`) or in a table (:func:`table`). Worker ids, host and
  queue names, error messages: anyone who can write a row chooses them, and a
  terminal executes the control sequences it is sent (an ESC sequence can
  retitle the window, rewrite earlier lines or answer back into the shell; a
  CR overwrites the line; a bidi override reorders what is read). Every
  command prints such text through :func:`printable`, so each one
  neutralises the same characters the same way.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Sequence
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


def progress_words(done: int | None, total: int | None) -> str:
    """How far a job got (docs/progress.md): '420 of 1,000 (42%)', '420 done' without a total, '' for none.

    The percentage is rounded down: a job shows 100% only once it is done.
    """
    if done is None:
        return ""
    if total is None:
        return f"{done:,} done"
    percent = f" ({done * 100 // total}%)" if total else ""
    return f"{done:,} of {total:,}{percent}"


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


#: C0 controls but tab and newline, DEL, C1 controls, and the bidi marks, embeddings,
#: overrides and isolates; also the Unicode line and paragraph separators.
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 256 else f"\\u{code:04x}"


def printable(text: object, *, one_line: bool = False) -> str:
    """``text`` with every unsafe character written as its escape (``\\x1b``, ``\\u202e``).

    ``one_line`` also writes newlines as ``\\n`` and tabs as spaces, for a table cell.
    """
    shown = str(text)
    if one_line:
        shown = shown.replace("\n", "\\n").replace("\t", " ")
    return UNSAFE.sub(_escaped, shown)


def table(header: Sequence[str], rows: Sequence[Sequence[str]], numbers: Collection[int]) -> list[str]:
    """Aligned columns; the ``numbers`` columns to the right.

    Every cell is made printable first: queue names and workers' ids come
    from rows anyone with database access can write, and a terminal would
    execute the control sequences in them.
    """
    cells = [[printable(cell, one_line=True) for cell in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [
        "  ".join(
            (cell.rjust(width) if index in numbers else cell.ljust(width))
            for index, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in cells
    ]
