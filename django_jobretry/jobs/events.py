"""How the package speaks of a job: the structured fields of its log lines, and its signals.

Every transition logs the job id and attempt and never the arguments. Every
retry and every dead letter, whoever made it (a worker's failure, lease
recovery, an operator's cancel, the django-q2 adapter), is announced here:
one log line and one signal with one keyword shape, the one
docs/worker.md#django-signals-for-metrics-and-alerts documents.

Beside them, the error message as a failure log line carries it: one line, bounded, the
job's arguments scrubbed.

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

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from django.dispatch import Signal

from django_jobretry import signals
from django_jobretry.exceptions import UndecodableArguments
from django_jobretry.flows import events as flow_events
from django_jobretry.jobs.claimed import ClaimedJob
from django_jobretry.jobs.history import AttemptEnd, AttemptEntry, what_ended

logger = logging.getLogger("django_jobretry")


class AboutJob(Protocol):
    """What a line or a signal says of a job: a claimed job, a recovered one, a cancelled one."""

    @property
    def id(self) -> int | str: ...
    @property
    def task_name(self) -> str: ...
    @property
    def queue_name(self) -> str: ...
    @property
    def attempt(self) -> int: ...


class AboutDeadJob(AboutJob, Protocol):
    """A job just buried: whether it was a flow's step says whether its flow may be blocked."""

    @property
    def flow_step_id(self) -> int | None: ...


@dataclass(frozen=True)
class JobRef:
    """A job as a burial statement's RETURNING named it, for its line and its signal."""

    id: int
    task_name: str
    queue_name: str
    attempt: int
    flow_step_id: int | None


def log_extra(job: AboutJob, outcome: str, **more: Any) -> dict[str, Any]:
    """The structured fields every transition log line carries (never arguments)."""
    return {
        "job_id": job.id,
        "task": job.task_name,
        "queue": job.queue_name,
        "attempt": job.attempt,
        "outcome": outcome,
        **more,
    }


#: How a job line starts: id, attempt, task and queue, in the message as in ``extra``.
JOB_LINE = "job %s attempt %s (%s, queue %s)"


def job_line_args(job: AboutJob) -> tuple[object, ...]:
    """The arguments of JOB_LINE, so messages stay lazily formatted."""
    return (job.id, job.attempt, job.task_name, job.queue_name)


def send_job_signal(sender: type, signal: Signal, job: AboutJob, **more: Any) -> None:
    """A signal about ``job``, with the keyword arguments every job signal carries."""
    signals.send(
        signal,
        sender,
        log_extra(job, "signal_error"),
        job_id=job.id,
        task_name=job.task_name,
        queue_name=job.queue_name,
        attempt=job.attempt,
        **more,
    )


def announce_retry(
    sender: type,
    job: AboutJob,
    then: str,
    then_args: tuple[object, ...],
    *,
    reason: str,
    delay: timedelta,
    outcome: str = "retry_scheduled",
    level: int = logging.INFO,
    **logged: Any,
) -> None:
    """A committed retry: JOB_LINE, then ``then`` % ``then_args``, then ``job_retry_scheduled``.

    ``reason`` is how the attempt ended (``error``, ``timeout``, ``shutdown``,
    ``lease_expired``...); ``logged`` goes to the line's ``extra`` only.
    """
    extra = log_extra(job, outcome, reason=reason, delay=delay.total_seconds(), **logged)
    logger.log(level, f"{JOB_LINE} {then}", *job_line_args(job), *then_args, extra=extra)
    send_job_signal(sender, signals.job_retry_scheduled, job, reason=reason, delay=delay)


def announce_dead(
    sender: type,
    job: AboutDeadJob,
    then: str,
    then_args: tuple[object, ...],
    *,
    reason: str,
    dead_letter_id: int,
    requeued_as: int | None = None,
    outcome: str = "dead_lettered",
    **logged: Any,
) -> None:
    """A committed burial: the job's line (a warning; JOB_LINE, then ``then``), then ``job_dead_lettered``.

    ``requeued_as`` is the job a policy's ``requeue_budget`` revived the dead
    letter as, already (so a receiver knows whether the job has really ended).
    """
    extra = log_extra(job, outcome, reason=reason, dead_letter_id=dead_letter_id, **logged)
    logger.warning(f"{JOB_LINE} {then}", *job_line_args(job), *then_args, extra=extra)
    send_job_signal(
        sender,
        signals.job_dead_lettered,
        job,
        reason=reason,
        dead_letter_id=dead_letter_id,
        requeued_as=requeued_as,
    )
    # Only a flow's step blocks a flow: the flows are read for those alone.
    if requeued_as is None and job.flow_step_id is not None:
        flow_events.blocked([dead_letter_id])


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


def scrubbed(text: str, args: Any, kwargs: Any) -> str:
    """``text`` with every argument value of SCRUB_MIN_CHARS or more replaced by SCRUBBED.

    Also what the Sentry integration sends of a message and a traceback
    (contrib/sentry): text leaving the database passes here.
    """
    budget = [SCRUB_MAX_VALUES]
    values = list(kwargs.values()) if isinstance(kwargs, dict) else kwargs  # names are not data
    found = {value for value in _values([args, values], budget) if len(value) >= SCRUB_MIN_CHARS}
    for value in sorted(found, key=len, reverse=True):  # the longest first: a value inside another
        text = text.replace(value, SCRUBBED)
    return text


def logged_message(message: str, args: Any, kwargs: Any) -> str:
    """``message`` for a log line: one line, arguments scrubbed, at most LOG_MESSAGE_CHARS."""
    line = " ".join(scrubbed(message, args, kwargs).split())  # newlines would forge log lines
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
