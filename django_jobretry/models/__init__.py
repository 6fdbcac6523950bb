"""Storage: live jobs in one table, dead letters in their own.

Dead letters live apart so the hot jobs table stays small and its partial
indexes stay tiny whatever the backlog of failures.
"""

from django_jobretry.models.dead_letter import (
    Dashboard,
    DeadLetter,
    DeadLetterSource,
    DeadReason,
    Death,
    ImportedFailure,
)
from django_jobretry.models.flow import Flow, FlowEdge, FlowState, FlowStep, OnDead, StepRole, StepState
from django_jobretry.models.holds import Circuit, CircuitState, Pause, RateBucket
from django_jobretry.models.job import KEEPS_KEY, LIVE_STATUSES, Job, JobQuerySet, JobStatus
from django_jobretry.models.schedule import Schedule
from django_jobretry.models.status_sample import CounterEvent, EventCounter, StatusSample
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
    "Flow",
    "FlowEdge",
    "FlowState",
    "FlowStep",
    "ImportedFailure",
    "Job",
    "JobQuerySet",
    "JobStatus",
    "OnDead",
    "Pause",
    "RateBucket",
    "Schedule",
    "StatusSample",
    "StepRole",
    "StepState",
    "WorkerProcess",
    "WorkerProcessQuerySet",
]
