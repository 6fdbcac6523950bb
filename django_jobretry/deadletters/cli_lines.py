"""What `manage.py deadletters` prints: selection, tables, `show`, `groups`, repairs, near names.

Nothing here writes job state: the command acts through the dead-letter
service. `groups` prints the failure groups (deadletters/search.py), each
row's fingerprint being what `requeue --all --fingerprint` takes, so the
command line answers the same questions as the admin's "Failure groups"
page. A repair recorded in a requeue history holds argument values, so it
follows the arguments: printed when no PAYLOAD_REDACTOR is configured, and
reduced to which argument changed how when one is (a redactor cannot be
applied to a diff), in the text and the ``--json`` output alike. A filter
that matched nothing gets a hint: a near name that does match, if any (task
names are full dotted paths, and a queue name may be one letter off).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import QuerySet
from django.utils import timezone

from django_jobretry.conf import jobretry_settings
from django_jobretry.deadletters.search import FailureGroup
from django_jobretry.deadletters.search import groups as failure_groups
from django_jobretry.deadletters.service import filtered
from django_jobretry.display import count_of, humanize_delay, printable, progress_words
from django_jobretry.display.redaction import redacted_payload
from django_jobretry.models import DeadLetter
from django_jobretry.registry import registry


def format_cursor(cursor: tuple[datetime, int]) -> str:
    return f"{cursor[0].isoformat()},{cursor[1]}"


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
    ).filter(*(options.get("arg") or ()))  # --arg: Q objects (cli.argument_filter)


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
        "progress": progress(dead),
    }


def progress(dead: DeadLetter) -> dict[str, Any] | None:
    """How far its last attempt got (docs/progress.md), None when it reported nothing."""
    if dead.progress_done is None:
        return None
    return {
        "done": dead.progress_done,
        "total": dead.progress_total,
        "note": dead.progress_note or "",
        "reported_at": dead.progress_at,
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
        ("got to", _got_to(dead)),
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


def _got_to(dead: DeadLetter) -> str:
    """ "420 of 1,000 (42%): copying invoices, at <time>", or "-" when its last attempt reported nothing."""
    words = progress_words(dead.progress_done, dead.progress_total)
    if not words:
        return "-"
    note = f": {dead.progress_note}" if dead.progress_note else ""
    return f"{words}{note}, at {when(dead.progress_at)}"


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


# --- groups -----------------------------------------------------------------------------------

GROUP_HEADERS = ("fingerprint", "dead", "first seen", "last seen", "tasks", "reasons", "example")
GROUP_CAPS = (16, 10, 25, 25, 60, 30, 80)


def groups(command: BaseCommand, options: dict[str, Any]) -> None:
    """Print the groups ``options`` (``--since``, ``--limit``, ``--json``) select."""
    found = failure_groups(since=options["since"], limit=options["limit"])
    if options["json"]:
        out = {"groups": [group_json(group) for group in found]}
        command.stdout.write(json.dumps(out, cls=DjangoJSONEncoder, indent=2))
        return
    if not found:
        command.stdout.write("No dead letters match.")
        return
    for line in table(GROUP_HEADERS, [group_row(group) for group in found], GROUP_CAPS):
        command.stdout.write(line)
    command.stdout.write(
        "Act on a group: manage.py deadletters requeue --all --fingerprint FINGERPRINT (or discard)"
    )


def group_row(group: FailureGroup) -> tuple[object, ...]:
    example = error_line(group.example_class, group.example_message)
    return (
        group.fingerprint,
        group.count,
        when(group.first_seen),
        when(group.last_seen),
        ", ".join(group.tasks),
        ", ".join(group.reasons),
        clip(example, 80),
    )


def group_json(group: FailureGroup) -> dict[str, Any]:
    return {
        "fingerprint": group.fingerprint,
        "count": group.count,
        "first_seen": group.first_seen,
        "last_seen": group.last_seen,
        "tasks": group.tasks,
        "reasons": group.reasons,
        "example_class": group.example_class,
        "example_message": group.example_message,
    }


# --- repairs in a requeue history -------------------------------------------------------------


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


# --- a near name, when a filter matched nothing -----------------------------------------------

#: Distinct names read to find a close one; more would only slow an empty listing down.
CANDIDATES = 1000


def nearest(value: str, known: Iterable[str]) -> list[str]:
    """Names ending in ``.value`` (a missing module prefix) first, else close spellings."""
    names = sorted(set(known))
    suffixed = [name for name in names if name.endswith(f".{value}")]
    return suffixed[:3] or difflib.get_close_matches(value, names, n=3)


def hint(*, task: str | None, queue: str | None) -> str | None:
    """A sentence for a --task or --queue that no dead letter has, or None when both exist."""
    for option, field, value, extra in (
        ("--task", "task_name", task, registry.names()),
        ("--queue", "queue_name", queue, ()),
    ):
        if value is None or DeadLetter.objects.filter(**{field: value}).exists():
            continue
        seen = DeadLetter.objects.order_by().values_list(field, flat=True).distinct()[:CANDIDATES]
        close = nearest(value, [*seen, *extra])
        names = " or ".join(repr(name) for name in close)
        suggestion = f" Did you mean {names}?" if close else ""
        return f"No dead letter has {option} {value!r}.{suggestion}"
    return None
