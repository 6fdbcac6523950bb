"""The error message as a failure log line carries it: one line, bounded, the job's arguments scrubbed.

A worker's "failed with builtins.ConnectionError" says what broke but not
why; the message says why ("connection refused by partner.example"). Logs
reach places the admin's payload permission does not guard, so the message
is logged only after it passed here: a handler's message often quotes its
own arguments (``f"order {order_id} not found"``), and every argument value
of four characters or more found in it is replaced with ``<argument>``
(shorter ones would blank out ordinary words and digits). The stored
history keeps the message as it was; the admin shows it behind the payload
permission.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django_jobretry.exceptions import UndecodableArguments
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.history import AttemptEnd, AttemptEntry, what_ended

#: Characters of the message a log line carries; the whole one is in the job's history.
LOG_MESSAGE_CHARS = 200
#: Argument values shorter than this are not scrubbed: they match ordinary text.
SCRUB_MIN_CHARS = 4
#: Argument values looked at: a bound on the work one log line may cost.
SCRUB_MAX_VALUES = 10_000
#: What replaces an argument value in a logged message.
SCRUBBED = "<argument>"
#: Characters of stored argument text decoded to scrub a message; past it the message is not logged.
SCRUB_MAX_TEXT = 1_000_000

#: Endings whose phrase already says everything (no exception, no message worth adding).
_WITHOUT_MESSAGE = {AttemptEnd.SHUTDOWN.value, AttemptEnd.TIMEOUT.value, AttemptEnd.CANCELLED.value}


def _values(value: Any, budget: list[int]) -> Iterator[str]:
    """The texts of the scalar values in ``value`` (depth first), at most SCRUB_MAX_VALUES."""
    stack = [value]
    while stack and budget[0] > 0:
        item = stack.pop()
        budget[0] -= 1
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        elif isinstance(item, str | int | float) and not isinstance(item, bool):
            yield str(item)


def logged_message(message: str, args: Any, kwargs: Any) -> str:
    """``message`` for a log line: one line, arguments scrubbed, at most LOG_MESSAGE_CHARS."""
    budget = [SCRUB_MAX_VALUES]
    values = list(kwargs.values()) if isinstance(kwargs, dict) else kwargs  # names are not data
    found = {text for text in _values([args, values], budget) if len(text) >= SCRUB_MIN_CHARS}
    for text in sorted(found, key=len, reverse=True):  # the longest first: a value inside another
        message = message.replace(text, SCRUBBED)
    line = " ".join(message.split())  # newlines would forge log lines
    if len(line) > LOG_MESSAGE_CHARS:
        line = line[: LOG_MESSAGE_CHARS - 3] + "..."
    return line


def job_arguments(job: ClaimedJob) -> tuple[Any, Any] | None:
    """The job's arguments to scrub a message with; None when too big or not decodable."""
    size = sum(len(raw) for raw in (job.raw_args, job.raw_kwargs) if isinstance(raw, str | bytes))
    if size > SCRUB_MAX_TEXT:
        return None
    try:
        return job.arguments()
    except UndecodableArguments:
        return None


def failure_phrase(entry: AttemptEntry, arguments: tuple[Any, Any] | None) -> tuple[str, str]:
    """("failed with builtins.KeyError: <message>", the logged message) for a failure line.

    ``arguments`` None (they could not be read to scrub it): no message.
    """
    phrase = what_ended(entry)
    if entry["ended"] in _WITHOUT_MESSAGE or arguments is None:
        return phrase, ""
    message = logged_message(entry["message"], *arguments)
    return (f"{phrase}: {message}" if message else phrase), message
