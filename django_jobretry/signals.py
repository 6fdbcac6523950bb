"""Django signals for job lifecycle events, for metrics and alerts.

Sent by the worker with the Worker class as sender, after the transition is
committed; a failing receiver is logged and never disturbs the worker.
Keyword arguments: ``job_id``, ``task_name``, ``queue_name``, ``attempt``
and, per signal, ``delay`` (timedelta), ``reason`` and ``dead_letter_id``.
"""

from django.dispatch import Signal

job_started = Signal()
job_succeeded = Signal()
job_retry_scheduled = Signal()
job_dead_lettered = Signal()
#: Sent by the dead-letter service with DeadLetter as sender; kwargs
#: ``dead_letter_id``, ``job_id``, ``task_name``, ``queue_name``, ``actor``
#: and, for requeues, ``requeue_count``.
job_requeued = Signal()
dead_letter_discarded = Signal()
#: Sent before retention deletes old dead letters; kwargs ``counts``
#: ({(queue_name, reason): n}) and ``older_than`` (timedelta).
dead_letters_pruning = Signal()
