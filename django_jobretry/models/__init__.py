"""Storage: live jobs in one table, dead letters in their own.

Dead letters live apart so the hot jobs table stays small and its partial
indexes stay tiny whatever the backlog of failures.
"""

from django_jobretry.models.dashboard import Dashboard
from django_jobretry.models.dead_letter import DeadLetter, DeadLetterSource, DeadReason
from django_jobretry.models.death import Death
from django_jobretry.models.event_counter import CounterEvent, EventCounter
from django_jobretry.models.holds import Circuit, CircuitState, Pause
from django_jobretry.models.imported_failure import ImportedFailure
from django_jobretry.models.job import KEEPS_KEY, LIVE_STATUSES, Job, JobQuerySet, JobStatus
from django_jobretry.models.limits import RateBucket
from django_jobretry.models.schedule import Schedule
from django_jobretry.models.status_sample import StatusSample
from django_jobretry.models.worker_process import WorkerProcess, WorkerProcessQuerySet

__all__ = [
    "KEEPS_KEY",
    "LIVE_STATUSES",
    "Circuit",
    "CircuitState",
    "CounterEvent",
    "Dashboard",
    "DeadLetter",
    "DeadLetterSource",
    "DeadReason",
    "Death",
    "EventCounter",
    "ImportedFailure",
    "Job",
    "JobQuerySet",
    "JobStatus",
    "Pause",
    "RateBucket",
    "Schedule",
    "StatusSample",
    "WorkerProcess",
    "WorkerProcessQuerySet",
]
