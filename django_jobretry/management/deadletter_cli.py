"""Helpers of `manage.py deadletters`: argument types, selection, rendering, pacing, progress.

Nothing here writes job state: the command acts through django_jobretry.deadletters.
"""

from __future__ import annotations

import getpass
import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.core.management.base import OutputWrapper
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import QuerySet
from django.utils import timezone

from django_jobretry.deadletters import filtered
from django_jobretry.display.humanize import count_of, humanize_delay
from django_jobretry.display.redaction import redacted_payload
from django_jobretry.display.terminal import printable
from django_jobretry.management.repair_lines import repair_lines, shown_history
from django_jobretry.models import DeadLetter

EXIT_OK = 0
EXIT_PARTIAL = 1
EXIT_USAGE = 2
EXIT_NOTHING = 3
EXIT_FAILED = 4
EXIT_INTERRUPTED = 130


class Terminal(Protocol):
    """What the confirmation prompt needs from stdin."""

    def isatty(self) -> bool: ...

    def readline(self) -> str: ...


def format_cursor(cursor: tuple[datetime, int]) -> str:
    return f"{cursor[0].isoformat()},{cursor[1]}"


def default_actor() -> str:
    """The OS user running the command, recorded as the requeue/discard actor."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry, e.g. in a container
        return "unknown-os-user"


# --- selection -----------------------------------------------------------------------------------

#: The filter options (argparse dests) of list, requeue and discard.
FILTERS = ("queue", "task", "reason", "error_class", "older_than", "since", "fingerprint", "arg")


def select(options: Mapping[str, Any]) -> QuerySet[DeadLetter]:
    """Dead letters matching the command's filters (its parsed ``options``), newest dead first."""
    return filtered(
        queue_name=options["queue"],
        task_name=options["task"],
        reason=options["reason"],
        error_class=options["error_class"],
        older_than=options["older_than"],
        since=options["since"],
        fingerprint=options["fingerprint"],
    ).filter(*(options.get("arg") or ()))  # --arg: Q objects (deadletter_arguments.argument_filter)


# --- rendering -----------------------------------------------------------------------------------


def when(value: datetime | None) -> str:
    return "-" if value is None else timezone.localtime(value).isoformat(sep=" ", timespec="seconds")


def first_line(dead: DeadLetter) -> str:
    return error_line(dead.last_error_class, dead.last_error)


def error_line(error_class: str, message: str) -> str:
    """``PartnerTimeout: the message's first line``, as the tables print an error."""
    lines = message.strip().splitlines()
    short_class = error_class.rpartition(".")[2]
    return ": ".join(part for part in (short_class, lines[0] if lines else "") if part)


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], caps: Sequence[int]) -> list[str]:
    cells = [
        [clip(printable(cell, one_line=True), cap) for cell, cap in zip(row, caps, strict=True)]
        for row in rows
    ]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headers)]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [list(headers), *cells]
    ]


LIST_HEADERS = ("id", "dead_at", "task", "queue", "reason", "attempts", "requeues", "last error")
LIST_CAPS = (12, 25, 60, 30, 13, 9, 8, 80)


def list_row(dead: DeadLetter) -> tuple[object, ...]:
    attempts = f"{dead.attempts}/{dead.max_attempts}"
    return (
        dead.pk,
        when(dead.dead_at),
        dead.task_name,
        dead.queue_name,
        dead.reason,
        attempts,
        dead.requeue_count,
        first_line(dead),
    )


def summary(dead: DeadLetter) -> dict[str, Any]:
    """The machine form of a list row (no arguments)."""
    return {
        "id": dead.pk,
        "job_id": dead.job_id,
        "task": dead.task_name,
        "queue": dead.queue_name,
        "reason": dead.reason,
        "attempts": dead.attempts,
        "max_attempts": dead.max_attempts,
        "requeue_count": dead.requeue_count,
        "last_error_class": dead.last_error_class,
        "last_error": dead.last_error,
        "enqueued_at": dead.enqueued_at,
        "dead_at": dead.dead_at,
    }


def payload(dead: DeadLetter) -> tuple[Any, Any, str | None]:
    """(args, kwargs, why hidden): arguments through PAYLOAD_REDACTOR, like the admin."""
    shown = redacted_payload(dead.task_name, dead.args, dead.kwargs)
    if shown.failed:
        return None, None, f"hidden: PAYLOAD_REDACTOR raised {shown.failed}"
    if shown.undecodable:
        return None, None, "not shown: the stored arguments cannot be decoded (nested too deep)"
    return shown.args, shown.kwargs, None


def detail(dead: DeadLetter) -> dict[str, Any]:
    """Everything about one dead letter, arguments redacted."""
    args, kwargs, hidden = payload(dead)
    return {
        **summary(dead),
        "policy": dead.policy_name,
        "priority": dead.priority,
        "unique_key": dead.unique_key,
        "first_attempt_at": dead.first_attempt_at,
        "args": args,
        "kwargs": kwargs,
        **({"arguments_hidden": hidden} if hidden else {}),
        "errors": dead.errors,
        "requeue_history": shown_history(dead.requeue_history),
    }


def _attempts(count: object) -> str:
    """'1 attempt', '3 attempts'; a history entry written by hand may hold anything there."""
    return (
        count_of(count, "attempt")
        if isinstance(count, int) and not isinstance(count, bool)
        else f"{count} attempts"
    )


def show_lines(dead: DeadLetter) -> list[str]:
    """The human form of `show`: fields, arguments, full error history, requeue history."""
    fields = [
        ("task", dead.task_name),
        ("queue", dead.queue_name),
        ("policy", dead.policy_name),
        ("priority", dead.priority),
        ("reason", f"{dead.reason} ({dead.get_reason_display()})"),
        ("attempts", f"{dead.attempts} of {dead.max_attempts}"),
        ("unique key", dead.unique_key or "-"),
        ("enqueued at", when(dead.enqueued_at)),
        ("first attempt", when(dead.first_attempt_at)),
        ("dead at", when(dead.dead_at)),
        ("requeued", f"{count_of(dead.requeue_count, 'time')} before"),
        ("last error", first_line(dead) or "-"),
    ]
    lines = [f"Dead letter {dead.pk} (job {dead.job_id})"]
    lines += [f"  {name + ':':<15}{printable(value, one_line=True)}" for name, value in fields]
    lines += ["", "Arguments"]
    args, kwargs, hidden = payload(dead)
    if hidden:
        lines.append(f"  {hidden}")
    else:
        for name, value in (("args", args), ("kwargs", kwargs)):
            text = json.dumps(value, indent=2, ensure_ascii=False, cls=DjangoJSONEncoder, sort_keys=True)
            lines.append(f"  {name}: " + printable(text).replace("\n", "\n  "))
    # A history Python could not decode comes back as text (models/fields.py): list nothing then.
    errors = [e for e in dead.errors if isinstance(e, dict)] if isinstance(dead.errors, list) else []
    history = dead.requeue_history if isinstance(dead.requeue_history, list) else []
    lines += ["", f"Error history ({count_of(len(errors), 'attempt')} recorded)"]
    shown: dict[str, object] = {}  # traceback -> the attempt it was printed with
    for entry in errors:
        trace = str(entry.get("traceback") or "").rstrip()
        lines += _error_lines(entry, trace, same_as=shown.get(trace) if trace else None)
        shown.setdefault(trace, entry.get("attempt", "?"))
    lines += ["", f"Requeue history ({len(history) or 'never requeued'})"]
    for number, entry in enumerate((e for e in history if isinstance(e, dict)), 1):
        lines.append(
            f"  {number}. at {entry.get('at', '?')} by {entry.get('by') or '?'}: from dead letter "
            f"{entry.get('dead_letter_id', '?')} (job {entry.get('job_id', '?')}, {entry.get('reason', '?')} "
            f"after {_attempts(entry.get('attempts'))}, dead at {entry.get('dead_at', '?')})"
        )
        if entry.get("last_error"):
            lines.append(f"     last error: {printable(entry['last_error'], one_line=True)}")
        lines += repair_lines(entry)
    return [printable(line) for line in lines]


def _error_lines(entry: dict[str, Any], trace: str, *, same_as: object | None) -> list[str]:
    """One attempt; a traceback already printed for an earlier attempt is named, not repeated."""
    head = f"  attempt {entry.get('attempt', '?')} at {entry.get('at', '?')} on {entry.get('worker') or '?'}"
    head += f": {entry.get('kind', '?')} error, ended {entry.get('ended', '?')}"
    if isinstance(entry.get("delay"), int | float):
        head += f", retried after {humanize_delay(timedelta(seconds=entry['delay']))}"
    error = ": ".join(p for p in (entry.get("error_class", ""), entry.get("message", "")) if p)
    lines = [head, *(f"    {line}" for line in str(error or "-").splitlines())]
    if same_as is not None:
        lines.append(f"    | (the same traceback as attempt {same_as})")
    else:
        lines += [f"    | {line}" for line in trace.splitlines()]
    return lines


# --- pacing and progress -------------------------------------------------------------------------


class Pacer:
    """Spaces batches so that at most ``per_second`` items start per second.

    ``clock`` and ``sleep`` are injectable: tests count the sleeps instead of timing them.
    """

    def __init__(
        self,
        per_second: float | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.per_second, self.clock, self.sleep = per_second, clock, sleep
        self._next: float | None = None

    def batch_size(self, unpaced: int) -> int:
        """Unpaced: ``unpaced``; paced: about ten small batches a second, at least one item each."""
        return unpaced if self.per_second is None else max(1, min(unpaced, int(self.per_second / 10)))

    def wait(self, count: int) -> None:
        """Call before acting on ``count`` items: sleeps until they are due."""
        if self.per_second is None:
            return
        now = self.clock()
        start = now if self._next is None else max(self._next, now)
        if start > now:
            self.sleep(start - now)
        self._next = start + count / self.per_second


class Progress:
    """A one-line text bar redrawn in place on stderr: `requeue [#####-----] 50/100`."""

    WIDTH = 30

    def __init__(self, stream: OutputWrapper, total: int, label: str, *, enabled: bool) -> None:
        self.stream, self.total, self.label, self.enabled = stream, total, label, enabled
        self._drawn = False

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        filled = self.WIDTH * done // max(self.total, 1)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{self.total}", style_func=str, ending="")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("", style_func=str)
            self._drawn = False
