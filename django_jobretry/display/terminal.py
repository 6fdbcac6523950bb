"""Text from the database, made safe to print on an operator's terminal, alone or in a table.

Worker ids, host and queue names, error messages: anyone who can write a row
chooses them, and a terminal executes the control sequences it is sent (an
ESC sequence can retitle the window, rewrite earlier lines or answer back
into the shell; a CR overwrites the line; a bidi override reorders what is
read). Every command prints such text through :func:`printable`, so each one
neutralises the same characters the same way.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

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
