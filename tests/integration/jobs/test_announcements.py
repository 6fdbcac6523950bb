"""Every retry and every dead letter is announced with one signal shape, whoever made it.

A failed attempt, a lost lease and an operator's cancel (of a waiting job
and of a running one) each send ``job_retry_scheduled`` or
``job_dead_lettered`` with the same keyword arguments
(docs/worker.md#signals). The automatic requeue of a policy's
``requeue_budget`` revives the dead letter it just made directly, without
the operator's requeue (no second lock, no re-read). A lost lease or a
cancel that buries a flow's step announces the flow it blocks; one that
buries any other job reads no flow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import DurationField, Value
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext

from django_jobretry import FatalError, signals
from django_jobretry.flows import Workflow
from django_jobretry.jobs import recovery
from django_jobretry.jobs.recovery import bury_cancelled_attempt, cancel_jobs
from django_jobretry.models import DeadLetter, Flow, Job, JobStatus
from tests.attempts import OWNER, claim_one, fail_attempt
from tests.jobs_app import flow_jobs, jobs

pytestmark = pytest.mark.django_db

JOB = {"job_id", "task_name", "queue_name", "attempt", "reason"}
RETRY = JOB | {"delay"}
DEAD = JOB | {"dead_letter_id", "requeued_as"}


@pytest.fixture
def heard() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """(signal, keyword arguments) of every retry and dead letter announced while the test runs."""
    received: list[tuple[str, dict[str, Any]]] = []

    def retried(sender: Any, signal: Any, **kwargs: Any) -> None:
        received.append(("retry", kwargs))

    def died(sender: Any, signal: Any, **kwargs: Any) -> None:
        received.append(("dead", kwargs))

    signals.job_retry_scheduled.connect(retried)
    signals.job_dead_lettered.connect(died)
    yield received
    signals.job_retry_scheduled.disconnect(retried)
    signals.job_dead_lettered.disconnect(died)


def expire_leases() -> None:
    past = Now() - Value(timedelta(seconds=1), output_field=DurationField())
    Job.objects.filter(status=JobStatus.RUNNING).update(lease_expires_at=past)


def recover() -> None:
    for item in recovery.recover_expired(10, 10):
        recovery.announce(item, object)


def test_every_sender_uses_one_keyword_shape(heard: list[tuple[str, dict[str, Any]]]) -> None:
    jobs.always_fails.enqueue("retried")
    failed = fail_attempt(ConnectionResetError("reset"))
    Job.objects.filter(pk=failed.id).delete()  # its retry must not be claimed below
    jobs.fatal.enqueue("buried")
    fatal = fail_attempt(FatalError("bad payload"))
    lost = jobs.always_fails.enqueue("lost")
    claim_one()
    expire_leases()
    recover()
    Job.objects.filter(pk=lost.pk).delete()
    waiting = jobs.record.enqueue("cancelled while waiting")
    cancel_jobs([waiting.pk], actor="ops")
    jobs.record.enqueue("cancelled while running")
    running = claim_one()
    bury_cancelled_attempt(running, "ops", worker_id=OWNER, sender=object)

    assert [(kind, set(kwargs)) for kind, kwargs in heard] == [
        ("retry", RETRY),
        ("dead", DEAD),
        ("retry", RETRY),
        ("dead", DEAD),
        ("dead", DEAD),
    ]
    said = [
        (kwargs["job_id"], kwargs["task_name"], kwargs["attempt"], kwargs["reason"]) for _, kwargs in heard
    ]
    assert said == [
        (failed.id, "tests.jobs_app.jobs.always_fails", 1, "error"),
        (fatal.id, "tests.jobs_app.jobs.fatal", 1, "fatal"),
        (lost.pk, "tests.jobs_app.jobs.always_fails", 1, "lease_expired"),
        (waiting.pk, "tests.jobs_app.jobs.record", 0, "cancelled"),
        (running.id, "tests.jobs_app.jobs.record", 1, "cancelled"),
    ]
    dead_ids = {kwargs["dead_letter_id"] for kind, kwargs in heard if kind == "dead"}
    assert dead_ids == set(DeadLetter.objects.values_list("pk", flat=True))


def test_the_automatic_requeue_revives_what_the_burial_returned(
    heard: list[tuple[str, dict[str, Any]]],
) -> None:
    dead_letters = DeadLetter._meta.db_table
    jobs.budgeted.enqueue("budget")
    with CaptureQueriesContext(connection) as captured:
        failed = fail_attempt(ConnectionResetError("down"))
    [revived] = Job.objects.filter(args=["budget"])
    assert [(kind, kwargs["job_id"], kwargs["requeued_as"]) for kind, kwargs in heard] == [
        ("dead", failed.id, revived.pk)
    ]
    # Neither the operator's lock on the dead letter nor a re-read of it: the burial said it all.
    reads = [q["sql"] for q in captured.captured_queries if q["sql"].lstrip().startswith("SELECT")]
    assert not [sql for sql in reads if dead_letters in sql], reads
    assert (revived.requeue_count, revived.requeue_history[0]["by"]) == (1, "automatic (requeue_budget)")


def one_step_flow(name: str) -> None:
    flow = Workflow(name)
    flow.add(flow_jobs.step, name)
    flow.enqueue()


def lost_and_cancelled(enqueue: Callable[[str], object]) -> list[tuple[int, int]]:
    """Two jobs of ``enqueue`` buried: the first by lease recovery, the second by a cancel while ready.

    The first is claimed and asked to cancel, then its lease is lost.
    Returns (job id, dead letter id) per burial, in that order.
    """
    enqueue("lost")
    running = claim_one()
    cancel_jobs([running.id], actor="ops")  # running: asked to stop, then its lease is lost
    expire_leases()
    recover()
    enqueue("waiting")
    [waiting] = Job.objects.filter(status=JobStatus.READY).values_list("pk", flat=True)
    cancel_jobs([waiting], actor="ops")
    dead = dict(DeadLetter.objects.values_list("job_id", "pk"))
    return [(running.id, dead[running.id]), (waiting, dead[waiting])]


def test_a_lost_lease_and_a_cancel_of_a_flow_step_announce_the_flow_they_block() -> None:
    heard: list[tuple[str, int]] = []

    def blocked(**kwargs: Any) -> None:
        heard.append((kwargs["name"], kwargs["dead_letter_id"]))

    signals.flow_blocked.connect(blocked)
    try:
        burials = lost_and_cancelled(one_step_flow)
    finally:
        signals.flow_blocked.disconnect(blocked)
    assert heard == [("lost", burials[0][1]), ("waiting", burials[1][1])]
    assert list(Flow.objects.order_by("pk").values_list("blocked_by", flat=True)) == [d for _, d in burials]


def test_a_lost_lease_and_a_cancel_of_another_job_read_no_flow() -> None:
    flows = f'"{Flow._meta.db_table}"'  # as the ORM names it: the burials' own SQL calls flow functions
    with CaptureQueriesContext(connection) as captured:
        burials = lost_and_cancelled(jobs.record.enqueue)
    assert len(burials) == 2
    # The burial returned the job's flow step (none): no query asks which flow it blocked.
    assert not [q["sql"] for q in captured.captured_queries if flows in q["sql"]]
