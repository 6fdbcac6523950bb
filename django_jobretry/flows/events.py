"""The flow signals, sent by the worker once the statement that completed or blocked a flow committed.

The database advances flows (jobs/functions.sql); the worker that recorded
the step's end knows which flows to look at: the flows of the steps it
wrote, completed at that statement's time (``finished_at`` is the
statement's timestamp), or blocked by the dead letters it just made (the
first dead letter of a flow blocks it, so a second death in a blocked flow
sends nothing). One query, only when a recorded job was a flow step.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from django.db import DatabaseError
from django.db.models import QuerySet
from django.dispatch import Signal

from django_jobretry import signals
from django_jobretry.jobs.sql import loggable
from django_jobretry.models import Flow, FlowState

logger = logging.getLogger("django_jobretry.flows")


def completed(step_ids: Sequence[int], finished_at: datetime) -> None:
    """Send ``flow_completed`` for the flows of ``step_ids`` that the successes at ``finished_at`` ended."""
    found = Flow.objects.filter(step_rows__in=step_ids, state=FlowState.COMPLETED, finished_at=finished_at)
    _announce(found.distinct(), signals.flow_completed, "completed")


def blocked(dead_letter_ids: Sequence[int]) -> None:
    """Send ``flow_blocked`` for the flows these new dead letters block (each the first of its flow)."""
    found = Flow.objects.filter(blocked_by__in=dead_letter_ids, state=FlowState.BLOCKED)
    _announce(found, signals.flow_blocked, "blocked")


def _announce(flows: QuerySet[Flow], signal: Signal, what: str) -> None:
    try:
        rows = list(flows.values_list("pk", "name", "blocked_by"))
    except DatabaseError as exc:  # only what receivers are told: the flows themselves are written
        logger.warning("could not read the flows to announce", extra=loggable(exc))
        return
    for flow_id, name, dead_letter_id in rows:
        extra = {"flow_id": flow_id, "flow": name, "dead_letter_id": dead_letter_id}
        logger.info("flow %s %s", flow_id, what, extra=extra)
        signals.send(signal, Flow, extra, flow_id=flow_id, name=name, dead_letter_id=dead_letter_id)
