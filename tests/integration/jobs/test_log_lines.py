"""The lines an operator reads: each transition names the job, attempt, task, queue and error class.

Read with caplog from a real in-process worker and the real dead-letter
service; arguments (a private one here) never appear in a message or a field.
"""

from __future__ import annotations

import logging

import pytest

from django_jobretry import deadletters
from django_jobretry.models import DeadLetter
from tests.inprocess import run_burst
from tests.jobs_app import jobs

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("keep_signal_handlers")]

ARGUMENT = "4242-private-argument"


def lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "django_jobretry"]


def by_outcome(records: list[logging.LogRecord], outcome: str) -> list[logging.LogRecord]:
    return [record for record in records if getattr(record, "outcome", None) == outcome]


def test_every_transition_names_task_queue_attempt_and_error_class(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="django_jobretry")
    ok = jobs.record.enqueue(ARGUMENT)
    doomed = jobs.fatal.enqueue(ARGUMENT)
    run_burst(concurrency=1)
    records = lines(caplog)

    [started_ok] = [r for r in by_outcome(records, "started") if r.job_id == ok.pk]  # type: ignore[attr-defined]
    assert started_ok.levelno == logging.DEBUG
    assert started_ok.getMessage() == f"job {ok.pk} attempt 1 ({jobs.record.name}, queue default) started"
    [succeeded] = by_outcome(records, "succeeded")
    assert succeeded.getMessage() == f"job {ok.pk} attempt 1 ({jobs.record.name}, queue default) succeeded"

    dead = DeadLetter.objects.get(job_id=doomed.pk)
    [buried] = by_outcome(records, "dead_lettered")
    assert buried.getMessage() == (
        f"job {doomed.pk} attempt 1 ({jobs.fatal.name}, queue default) failed with "
        f"{dead.last_error_class}: payload for <argument> is invalid; dead letter {dead.pk} (fatal)"
    )
    assert (buried.task, buried.queue, buried.attempt, buried.error_class) == (  # type: ignore[attr-defined]
        jobs.fatal.name,
        "default",
        1,
        dead.last_error_class,
    )
    # The message names why, with the argument it quoted scrubbed; the history keeps it whole.
    assert buried.error_message == "payload for <argument> is invalid"  # type: ignore[attr-defined]
    assert dead.last_error == f"payload for {ARGUMENT} is invalid"
    assert dead.last_error_class  # the message names a real class, not an empty one
    assert all(ARGUMENT not in r.getMessage() and ARGUMENT not in str(vars(r)) for r in records)


def test_a_retry_line_names_the_error_class_and_the_delay(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="django_jobretry")
    job = jobs.flaky.enqueue("once", 1)
    run_burst(concurrency=1)
    [retry] = by_outcome(lines(caplog), "retry_scheduled")
    message = retry.getMessage()
    assert message.startswith(f"job {job.pk} attempt 1 ({jobs.flaky.name}, queue default) failed with ")
    assert retry.error_class in message  # type: ignore[attr-defined]
    assert ": flaky failure for <argument>; retry in " in message
    assert retry.error_message == "flaky failure for <argument>"  # type: ignore[attr-defined]


def test_requeue_and_discard_say_who_did_it(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="django_jobretry")
    first, second = jobs.fatal.enqueue("a"), jobs.fatal.enqueue("b")
    run_burst(concurrency=1)
    one, two = (DeadLetter.objects.get(job_id=job.pk) for job in (first, second))
    caplog.clear()
    job = deadletters.requeue(one.pk, actor="alice")
    deadletters.discard(two.pk)
    [requeued] = by_outcome(lines(caplog), "requeued")
    [discarded] = by_outcome(lines(caplog), "discarded")
    assert requeued.getMessage() == (
        f"dead letter {one.pk} ({jobs.fatal.name}, queue default) requeued as job {job.pk} by alice"
    )
    assert discarded.getMessage() == (
        f"dead letter {two.pk} ({jobs.fatal.name}, queue default) discarded by an unnamed caller"
    )
    assert (requeued.actor, discarded.actor) == ("alice", "")  # type: ignore[attr-defined]


def test_a_worker_that_ran_one_attempt_says_attempt_in_the_singular(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="django_jobretry")
    jobs.record.enqueue("single")
    run_burst(concurrency=1)
    [stopped] = [r for r in lines(caplog) if "stopped after" in r.getMessage()]
    assert stopped.getMessage().endswith(" stopped after 1 attempt")
    assert stopped.attempts == 1  # type: ignore[attr-defined]
