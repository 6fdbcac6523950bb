"""Django signals for job lifecycle events, for metrics and alerts.

Sent after the transition is committed; a failing receiver is logged (by
:func:`send`, the one way this package sends them) and never disturbs the
worker or the operator's action. The worker's signals have the Worker class
as sender and the keyword arguments ``job_id``, ``task_name``,
``queue_name``, ``attempt`` and, per signal, ``reason`` (for a retry: how
the attempt ended), ``delay`` (timedelta), ``dead_letter_id`` and
``requeued_as``: one shape whoever retried or buried the job
(jobs/events.py, docs/worker.md#django-signals-for-metrics-and-alerts).
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import Signal

logger = logging.getLogger("django_jobretry")

job_started = Signal()
job_succeeded = Signal()
job_retry_scheduled = Signal()
#: Also ``requeued_as``: the id of the job the policy's ``requeue_budget`` revived the
#: dead letter as, or None. With a budget it is sent after that automatic requeue (and
#: after its ``job_requeued``), so a receiver can tell whether the job has really ended.
job_dead_lettered = Signal()
#: Sent by the dead-letter service with DeadLetter as sender; kwargs
#: ``dead_letter_id``, ``job_id``, ``task_name``, ``queue_name``, ``actor``
#: and, for requeues, ``requeue_count``.
job_requeued = Signal()
dead_letter_discarded = Signal()
#: Sent once per chunk of a bulk requeue or discard (up to 2,000 dead letters), with
#: DeadLetter as sender; kwargs ``actor`` and ``requeued`` (a list of (dead_letter_id,
#: job_id) pairs; job_id is another system's task id for a django-q2 dead letter) or
#: ``discarded`` (a list of (dead_letter_id, job_id) pairs). A chunk of one sends the
#: per-row signal above instead; a larger one sends those too, per dead letter, only
#: while they have a receiver.
dead_letters_requeued = Signal()
dead_letters_discarded = Signal()
#: Sent before retention deletes old dead letters; kwargs ``counts``
#: ({(queue_name, reason): n}) and ``older_than`` (timedelta).
dead_letters_pruning = Signal()
#: Sent by the hold service with Pause as sender when a queue or task is paused (or its
#: pause changed) and when a pause ends; kwargs ``queue_name``, ``task_name`` (one is None),
#: ``actor`` ("expired" for a pause whose ``until`` passed), ``reason`` and ``until``.
work_paused = Signal()
work_resumed = Signal()
#: Sent with Circuit as sender: ``task_name`` and, per signal, ``open_until``, ``opens``
#: and ``reason`` (opened), ``probe_job_id`` (half-open), ``released`` (closed: how many
#: held jobs were let go).
#: Sent by an enqueue (``@job``'s ``.enqueue()``, django.tasks' ``enqueue()``) with Job as sender
#: when its unique key was held and it returned the holding job instead of inserting one; kwargs
#: ``job_id`` (the holder), ``task_name``, ``queue_name``, ``unique_key``, ``status`` (the holder's,
#: as returned) and ``replaced`` (``on_conflict="replace"`` gave the still-ready holder the new call).
#: Never the arguments. Sent at once, inside the caller's transaction if there is one.
job_deduplicated = Signal()
#: Sent by the worker with Flow as sender once the statement recording a step's end committed: a
#: flow whose last open step succeeded (``flow_completed``), a flow a step's burial blocked, its first
#: dead letter (``flow_blocked``); kwargs ``flow_id``, ``name`` and ``dead_letter_id`` (the one that
#: blocks it; None when completed). A discard or a cancel that ends a flow sends neither.
flow_completed = Signal()
flow_blocked = Signal()
circuit_opened = Signal()
circuit_half_open = Signal()
circuit_closed = Signal()


def send(signal: Signal, sender: type, log_extra: dict[str, Any] | None = None, **kwargs: Any) -> None:
    """Send ``signal`` to every receiver; log each one that raised, with ``log_extra``.

    The log line holds ``log_extra`` and the receiver's exception, never the
    signal's keyword arguments: Django's task signals carry a ``TaskResult``
    with the task's arguments (their contract); this package's own carry none.
    """
    for receiver, result in signal.send_robust(sender, **kwargs):
        if isinstance(result, Exception):
            logger.error(
                "signal receiver %r failed: %s",
                receiver,
                type(result).__name__,
                exc_info=result,
                extra={**(log_extra or {}), "outcome": "signal_error", "error_class": type(result).__name__},
            )
