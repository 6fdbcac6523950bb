"""JobRetryIntegration with the SDK's own client and a capturing transport: what reaches Sentry.

One event per dead letter, not per attempt, fingerprinted with the dead
letter's failure group (so 50 dead letters of one group are one issue);
tags, the admin link and the earlier attempts as breadcrumbs; and never an
argument: not in the message, not in a frame's variables (also of an event
the job captures itself), not in the payload unless the project opts in, and
then only as PAYLOAD_REDACTOR returns it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import sentry_sdk
from django.db.models import DurationField, Value
from django.db.models.functions import Now
from django.urls import reverse
from sentry_sdk.integrations.logging import LoggingIntegration

from django_jobretry import job
from django_jobretry.holds import breakers
from django_jobretry.jobs import recovery
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.testing import run_jobs
from tests.attempts import claim_one
from tests.integration.sentry.conftest import DSN, Capturing, dumped
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db

SECRET = "s3cr3t-token-4711"  # noqa: S105
REDACTED = "[redacted]"
logger = logging.getLogger(__name__)


@job(name="tests.sentry.refused", policy="three")
def refused(order: int, token: str) -> None:
    """Fails every attempt, quoting its secret in the message as handlers do."""
    raise ConnectionRefusedError(f"partner refused order {order} with token {token}")


@job(name="tests.sentry.reports_itself", policy="three")
def reports_itself(token: str) -> None:
    """Captures one exception itself and logs another at ERROR: both would carry ``token`` in a frame."""
    secret_copy = token
    try:
        raise ValueError("cannot reach partner")
    except ValueError as exc:
        sentry_sdk.capture_exception(exc)
    try:
        raise LookupError("no fallback partner")
    except LookupError:
        logger.exception("partner down (%d characters of credentials)", len(secret_copy))


def redact(task_name: str, args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The PAYLOAD_REDACTOR of these tests: hides ``token``."""
    return args, {**kwargs, "token": REDACTED} if "token" in kwargs else kwargs


def test_a_job_that_fails_three_times_and_dies_sends_one_event_grouped_by_its_failure_group(
    sentry: Callable[..., Capturing],
) -> None:
    sent = sentry(admin_url="https://ops.example.com")
    queued = refused.enqueue(7, token=SECRET)

    run_jobs(include_scheduled=True)

    dead = DeadLetter.objects.get(job_id=queued.pk)
    assert dead.attempts == 3
    [event] = sent.events()
    assert event["fingerprint"] == [dead.fingerprint]
    assert event["level"] == "error"
    assert event["tags"] == {
        "jobretry.task": "tests.sentry.refused",
        "jobretry.queue": "default",
        "jobretry.reason": "exhausted",
        "jobretry.attempt": "3",
    }
    [exception] = event["exception"]["values"]
    assert (exception["module"], exception["type"]) == ("builtins", "ConnectionRefusedError")
    assert exception["value"] == "partner refused order 7 with token <argument>"
    frames = exception["stacktrace"]["frames"]
    assert frames[-1]["function"] == "refused"
    assert all("vars" not in frame for frame in frames)
    context = event["contexts"]["dead letter"]
    path = reverse("admin:django_jobretry_deadletter_change", args=[dead.pk])
    assert context["admin_url"] == f"https://ops.example.com{path}"
    assert (context["dead_letter_id"], context["failure_group"]) == (dead.pk, dead.fingerprint)
    assert not {"args", "kwargs"} & set(context)
    attempts = [crumb for crumb in event["breadcrumbs"]["values"] if crumb["category"] == "jobretry.attempt"]
    assert [crumb["message"] for crumb in attempts] == [
        f"attempt {n} failed with builtins.ConnectionRefusedError: {exception['value']}" for n in (1, 2)
    ]
    assert SECRET not in sent.text()


def test_fifty_dead_letters_of_one_failure_group_are_one_issue(sentry: Callable[..., Capturing]) -> None:
    sent = sentry(attempt_breadcrumbs=False)
    for order in range(50):
        refused.enqueue(order, token=f"{SECRET}-{order}")

    run_jobs(include_scheduled=True)

    groups = set(DeadLetter.objects.values_list("fingerprint", flat=True))
    assert DeadLetter.objects.count() == 50
    assert len(groups) == 1
    events = sent.events()
    assert len(events) == 50
    assert {tuple(event["fingerprint"]) for event in events} == {tuple(groups)}
    assert {event["contexts"]["dead letter"]["dead_letter_id"] for event in events} == set(
        DeadLetter.objects.values_list("pk", flat=True)
    )
    assert SECRET not in sent.text()


def test_the_payload_is_sent_only_when_asked_and_only_as_the_redactor_returns_it(
    sentry: Callable[..., Capturing], settings: Any
) -> None:
    settings.JOBRETRY = {**settings.JOBRETRY, "PAYLOAD_REDACTOR": f"{__name__}.redact"}
    sent = sentry(include_payload=True)
    refused.enqueue(8, token=SECRET)

    run_jobs(include_scheduled=True)

    [event] = sent.events()
    context = event["contexts"]["dead letter"]
    assert (context["args"], context["kwargs"]) == ([8], {"token": REDACTED})
    assert context["payload_redacted"] is True
    assert SECRET not in sent.text()


def test_events_captured_during_an_attempt_lose_their_frames_variables(
    sentry: Callable[..., Capturing],
) -> None:
    sent = sentry(dead_letters=False)
    reports_itself.enqueue(token=SECRET)

    run_jobs()

    events = sent.events()
    # The job's capture_exception and its logger.exception: the integration sends neither of its own.
    assert len(events) == 2
    assert sorted(event["exception"]["values"][0]["type"] for event in events) == [
        "LookupError",
        "ValueError",
    ]
    assert SECRET not in sent.text()
    assert '"vars"' not in sent.text()


def test_without_the_integration_frames_keep_their_variables(sentry: Callable[..., Capturing]) -> None:
    """The negative control: the test above would pass if no frame ever carried variables."""
    transport = Capturing()
    sentry_sdk.init(
        dsn=DSN,
        transport=transport,
        integrations=[LoggingIntegration(event_level=logging.ERROR)],
        auto_enabling_integrations=False,
    )
    reports_itself.enqueue(token=SECRET)

    run_jobs()

    assert len(transport.events()) == 2  # the dead letter's none: plain sentry-sdk never hears of it
    assert SECRET in transport.text()


def test_a_dead_letter_revived_by_its_requeue_budget_sends_nothing(sentry: Callable[..., Capturing]) -> None:
    sent = sentry()
    jobs.budgeted.enqueue("budget")

    run_jobs(include_scheduled=True)  # dies, is revived by its budget, runs again and dies for good

    [dead] = DeadLetter.objects.all()
    assert dead.requeue_count == 1
    [event] = sent.events()
    assert event["contexts"]["dead letter"]["dead_letter_id"] == dead.pk


def test_a_breaker_that_opens_is_an_event_and_can_be_turned_off(
    sentry: Callable[..., Capturing], django_capture_on_commit_callbacks: Any
) -> None:
    sent = sentry()
    with django_capture_on_commit_callbacks(execute=True):
        breakers.hold_task("tests.sentry.refused", timedelta(seconds=30), None, 1)
    [event] = sent.events()
    assert event["fingerprint"] == ["jobretry.circuit_opened", "tests.sentry.refused"]
    assert event["tags"]["jobretry.event"] == "circuit_opened"

    quiet = sentry(circuit_opened=False)
    with django_capture_on_commit_callbacks(execute=True):
        breakers.hold_task("tests.sentry.reports_itself", timedelta(seconds=30), None, 2)
    assert quiet.events() == []


def test_an_attempt_lost_with_its_worker_is_an_event(sentry: Callable[..., Capturing]) -> None:
    sent = sentry()
    lost = refused.enqueue(9, token=SECRET)
    claim_one()
    past = Now() - Value(timedelta(seconds=1), output_field=DurationField())
    Job.objects.filter(status=JobStatus.RUNNING).update(lease_expires_at=past)

    for item in recovery.recover_expired(10, 10):
        recovery.announce(item, object)

    [event] = sent.events()
    assert event["fingerprint"] == ["jobretry.worker_lost", "tests.sentry.refused"]
    assert event["contexts"]["job"]["job_id"] == lost.pk
    assert dumped(event).count(SECRET) == 0
