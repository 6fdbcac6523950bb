"""JobRetryIntegration: dead letters (and breakers, lost workers) as Sentry events.

The worker catches every exception a job raises, records it and decides
(retry or bury), so sentry-sdk alone sends nothing for a job that dies. The
integration listens to the package's own signals instead, which are sent once
the transition committed: one event per dead letter (not per attempt; the
earlier attempts become its breadcrumbs), fingerprinted with the dead
letter's failure group. A requeue budget that revives the dead letter at once
sends none: the job has not ended.

It also closes the side door: an event captured while an attempt runs (the
job's own ``capture_exception``, an ERROR log line with ``exc_info``), or
whose stack passes through this package, loses every frame's local
variables, where the job's arguments live.

Like Sentry's Celery and RQ integrations it is a class passed to
``sentry_sdk.init(integrations=[...])``; its receivers and its event
processor are installed once per process and do nothing for a client that
does not have it.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import sentry_sdk
from sentry_sdk.integrations import Integration
from sentry_sdk.scope import add_global_event_processor

from django_jobretry import signals
from django_jobretry.context import current_job
from django_jobretry.contrib.sentry import events
from django_jobretry.jobs.history import AttemptEnd
from django_jobretry.models import DeadLetter

logger = logging.getLogger("django_jobretry")

#: Our package's modules: an event whose stack passes through them loses its frames' variables.
_OUR_MODULE = "django_jobretry"


class JobRetryIntegration(Integration):
    """What the package sends to Sentry; every kind of event can be turned off.

    - ``dead_letters``: one event per dead letter, grouped by failure group.
    - ``attempt_breadcrumbs``: the dead letter's earlier attempts as its breadcrumbs.
    - ``include_payload``: the arguments, as PAYLOAD_REDACTOR returns them (off: none are sent).
    - ``circuit_opened``: a breaker that opened, one issue per task.
    - ``worker_lost``: an attempt whose worker was lost (its lease expired) and that is retried;
      one that is buried is a dead letter event already.
    - ``admin_url``: scheme and host put before the dead letter's admin path (the link is a path without).
    """

    identifier = "django_jobretry"

    def __init__(
        self,
        *,
        dead_letters: bool = True,
        attempt_breadcrumbs: bool = True,
        include_payload: bool = False,
        circuit_opened: bool = True,
        worker_lost: bool = True,
        admin_url: str | None = None,
    ) -> None:
        self.dead_letters = dead_letters
        self.attempt_breadcrumbs = attempt_breadcrumbs
        self.include_payload = include_payload
        self.circuit_opened = circuit_opened
        self.worker_lost = worker_lost
        self.admin_url = admin_url

    @staticmethod
    def setup_once() -> None:
        signals.job_dead_lettered.connect(_on_dead_lettered, dispatch_uid="jobretry.sentry.dead")
        signals.job_retry_scheduled.connect(_on_retry, dispatch_uid="jobretry.sentry.retry")
        signals.circuit_opened.connect(_on_circuit_opened, dispatch_uid="jobretry.sentry.circuit")
        add_global_event_processor(_without_frame_variables)


def _active() -> JobRetryIntegration | None:
    """The integration of the client in use, or None: then nothing of ours is sent or changed."""
    return sentry_sdk.get_client().get_integration(JobRetryIntegration)


def _on_dead_lettered(
    sender: type, *, dead_letter_id: int, requeued_as: int | None = None, **kwargs: Any
) -> None:
    integration = _active()
    if integration is None or not integration.dead_letters or requeued_as is not None:
        return
    dead = DeadLetter.objects.select_related("flow_step__flow").filter(pk=dead_letter_id).first()
    if dead is None:  # requeued or discarded already: nothing is left to link to
        return
    event = events.dead_letter_event(
        dead,
        admin_url=integration.admin_url,
        include_payload=integration.include_payload,
        breadcrumbs=integration.attempt_breadcrumbs,
    )
    sentry_sdk.capture_event(event)  # type: ignore[arg-type]


def _on_retry(
    sender: type,
    *,
    job_id: int | str,
    task_name: str,
    queue_name: str,
    attempt: int,
    reason: str,
    delay: timedelta,
    **kwargs: Any,
) -> None:
    integration = _active()
    if integration is None or not integration.worker_lost or reason != AttemptEnd.LEASE_EXPIRED.value:
        return
    sentry_sdk.capture_event(events.worker_lost_event(job_id, task_name, queue_name, attempt, delay))  # type: ignore[arg-type]


def _on_circuit_opened(
    sender: type, *, task_name: str, open_until: datetime, opens: int, reason: str, **kwargs: Any
) -> None:
    integration = _active()
    if integration is None or not integration.circuit_opened:
        return
    sentry_sdk.capture_event(events.circuit_event(task_name, open_until, opens, reason))  # type: ignore[arg-type]


def _without_frame_variables(event: Any, hint: Any) -> Any:
    """Drop every frame's local variables from an event captured in an attempt or through our code."""
    if _active() is None:
        return event
    stacks = [
        value.get("stacktrace")
        for key in ("exception", "threads")
        for value in (event.get(key) or {}).get("values", [])
        if isinstance(value, dict)
    ]
    frames = [frame for stack in stacks if stack for frame in stack.get("frames", [])]
    ours = any(str(frame.get("module") or "").startswith(_OUR_MODULE) for frame in frames)
    if ours or current_job() is not None:
        for frame in frames:
            frame.pop("vars", None)
    return event
