"""Failed attempts written in batches: one fenced statement for the retries, each outcome exactly once.

``Recorder.failed`` turns each failure into one FailedAttempt, decided unless its
policy has ``retry_for``; ``Recorder.record_failures`` writes the retries decided
together, everything else one by one (jobs/failures.py).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models import DurationField, Value
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext

from django_jobretry import FatalError
from django_jobretry.conf import jobretry_settings
from django_jobretry.jobs import claim
from django_jobretry.jobs.claimed import ClaimedJob, Failed, FailedAttempt, Interrupted, Succeeded, release
from django_jobretry.jobs.failures import retry_params, write_failures
from django_jobretry.jobs.history import AttemptEnd
from django_jobretry.jobs.record import Recorder
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.attempts import LEASE, OWNER
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db


def claim_now(count: int) -> list[ClaimedJob]:
    claimed = claim.claim(OWNER, count, LEASE, None)
    assert len(claimed) == count
    return claimed


def claim_failing(keys: str) -> list[ClaimedJob]:
    """One always-failing job per key (policy "three", no retry_for), all claimed."""
    for key in keys:
        jobs.always_fails.enqueue(key)
    return claim_now(len(keys))


def failed(job: ClaimedJob, message: str = "upstream reset") -> Failed:
    return Failed(job, ConnectionResetError(message))


def statements(captured: CaptureQueriesContext) -> list[str]:
    """The statements run, without the savepoints of the test's own transaction."""
    sql = (" ".join(query["sql"].split()) for query in captured.captured_queries)
    return [text[:27] for text in sql if not text.startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]


def refused(job: ClaimedJob, message: str) -> FailedAttempt:
    """A failure whose entry PostgreSQL refuses: a raw NUL, which every entry built here would escape."""
    attempt = Recorder(OWNER, object).failed(failed(job, message))
    return replace(attempt, entry={**attempt.entry, "message": f"{message} \x00"})


def write_all(attempts: list[FailedAttempt]) -> list[FailedAttempt]:
    return list(write_failures(attempts, history_limit=10))


def record(outcomes: list[Failed | Interrupted]) -> None:
    recorder = Recorder(OWNER, object)
    recorder.record_failures([recorder.failed(outcome) for outcome in outcomes])


def test_retries_of_a_batch_are_one_statement() -> None:
    outcomes: list[Failed | Interrupted] = [failed(job) for job in claim_failing("abc")]
    with CaptureQueriesContext(connection) as captured:
        record(outcomes)
    assert statements(captured) == ["UPDATE django_jobretry_job "]
    rows = Job.objects.order_by("pk")
    assert [(row.status, row.attempts, len(row.errors)) for row in rows] == [("ready", 1, 1)] * 3
    assert {row.errors[0]["delay"] for row in rows} == {0.01}  # the "three" policy's first delay
    assert all(row.run_at > row.first_attempt_at for row in rows)


def test_a_stale_failure_in_a_batch_changes_nothing_and_the_rest_are_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    held, lost = claim_failing("ab")
    assert release([lost]) == {lost.id}  # as a shutdown does: the attempt is gone
    before = Job.objects.values().get(pk=lost.id)
    record([failed(held), failed(lost)])
    assert Job.objects.values().get(pk=lost.id) == before
    assert Job.objects.get(pk=held.id).status == JobStatus.READY
    [stale] = [r for r in caplog.records if getattr(r, "outcome", None) == "stale_ignored"]
    assert (getattr(stale, "job_id", None), getattr(stale, "stale_outcome", None)) == (lost.id, "failed")
    assert f"outcome ignored (worker {OWNER})" in stale.getMessage()


def test_an_entry_postgresql_refuses_falls_back_alone(caplog: pytest.LogCaptureFixture) -> None:
    first, poisoned, third = claim_failing("abc")
    recorder = Recorder(OWNER, object)
    pending = [
        recorder.failed(failed(first, "one")),
        refused(poisoned, "two"),
        recorder.failed(failed(third)),
    ]
    written = write_all(pending)
    assert [(w.job.id, w.entry["message"]) for w in written] == [
        (first.id, "one"),
        (poisoned.id, "the error could not be recorded"),
        (third.id, "upstream reset"),
    ]
    messages = dict(Job.objects.values_list("pk", "errors__0__message"))
    assert messages == {
        first.id: "one",
        poisoned.id: "the error could not be recorded",
        third.id: "upstream reset",
    }
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.READY}
    fallbacks = [r for r in caplog.records if getattr(r, "outcome", None) == "record_fallback"]
    assert [getattr(r, "job_id", None) for r in fallbacks] == [poisoned.id]


def test_a_mixed_batch_ends_each_job_as_its_policy_says() -> None:
    jobs.always_fails.enqueue("retried")
    jobs.fatal.enqueue("buried")
    jobs.record.using(policy="emails").enqueue("past its deadline")  # retry_for 2 h: locked, then buried
    jobs.always_fails.enqueue("shut down")
    retried, buried, deadline, interrupted = claim_now(4)
    Job.objects.filter(pk=deadline.id).update(
        first_attempt_at=Now() - Value(timedelta(hours=3), output_field=DurationField())
    )
    outcomes: list[Failed | Interrupted] = [
        failed(retried),
        Failed(buried, FatalError("bad payload")),
        failed(deadline),
        Interrupted(interrupted, hold=timedelta(seconds=30)),
    ]
    record(outcomes)
    assert dict(DeadLetter.objects.values_list("job_id", "reason")) == {
        buried.id: "fatal",
        deadline.id: "deadline",
    }
    rows = {row.pk: row for row in Job.objects.all()}
    assert set(rows) == {retried.id, interrupted.id}
    assert rows[interrupted.id].errors[0]["ended"] == AttemptEnd.SHUTDOWN
    assert rows[interrupted.id].errors[0]["delay"] == 30.0


def test_a_refused_entry_inside_a_callers_transaction_leaves_it_usable() -> None:
    [job] = claim_failing("a")
    with transaction.atomic():  # as testing.run_jobs() records inside a TestCase
        [written] = write_all([refused(job, "one")])
        assert written.decision is not None
        assert not written.stale
        assert Job.objects.get().errors[0]["message"] == "the error could not be recorded"


# -- retries that ride on the success-and-claim statement (the worker's loop) ---------------------


def take(outcomes: list[Failed]) -> list[FailedAttempt]:
    """The failures the worker's loop keeps for the next claim: those decided a retry."""
    recorder = Recorder(OWNER, object)
    return [attempt for attempt in map(recorder.failed, outcomes) if attempt.retry is not None]


def test_retries_ride_on_the_claim_fenced_and_are_not_claimed_again_by_it() -> None:
    held, lost, succeeded = claim_failing("abc")
    jobs.record.enqueue("next")
    assert release([lost]) == {lost.id}  # its failure below is stale
    outcomes = [failed(held), failed(lost)]
    retries = take(outcomes)
    assert [retry.job.id for retry in retries] == [held.id, lost.id]
    with CaptureQueriesContext(connection) as captured:
        claimed = Recorder(OWNER, object).record_successes_and_claim(
            [Succeeded(succeeded)], retries=retries, limit=10, lease_seconds=LEASE, queues=None
        )
    # One statement, and one more only because a retry was refused: it tells a stale
    # attempt from one whose cancel was requested (jobs/recovery.py).
    assert [text[:4] for text in statements(captured)] == ["WITH", "WITH"]
    # The claim took the new job and the released one, not the job made ready beside it.
    assert sorted(job.id for job in claimed) == sorted([lost.id, Job.objects.get(args=["next"]).pk])
    rows = {row.pk: row for row in Job.objects.all()}
    assert (rows[held.id].status, rows[held.id].errors[0]["delay"]) == (JobStatus.READY, 0.01)
    assert (rows[lost.id].status, rows[lost.id].errors) == (JobStatus.RUNNING, [])
    assert rows[succeeded.id].status == JobStatus.SUCCEEDED


def test_a_refused_retry_on_the_claim_statement_falls_back_alone_and_the_claim_still_happens(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good, poisoned = claim_failing("ab")
    jobs.record.enqueue("next")
    retries = take([failed(good, "one"), failed(poisoned, "two")])
    retries[1] = refused(poisoned, "two")
    claimed = Recorder(OWNER, object).record_successes_and_claim(
        [], retries=retries, limit=10, lease_seconds=LEASE, queues=None
    )
    assert [job.args for job in claimed] == [["next"]]
    stored = dict(Job.objects.filter(status=JobStatus.READY).values_list("pk", "errors__0__message"))
    assert stored == {good.id: "one", poisoned.id: "the error could not be recorded"}
    fallbacks = [r for r in caplog.records if getattr(r, "outcome", None) == "record_fallback"]
    assert [getattr(r, "job_id", None) for r in fallbacks] == [poisoned.id]


def test_only_retries_can_wait_for_the_claim() -> None:
    jobs.always_fails.enqueue("retried")
    jobs.fatal.enqueue("buried")
    jobs.record.using(policy="emails").enqueue("retry_for")  # decided under a lock, at the database's time
    retried, buried, deadline = claim_now(3)
    outcomes = [failed(retried), Failed(buried, FatalError("bad")), failed(deadline)]
    recorder = Recorder(OWNER, object)
    attempts = [recorder.failed(outcome) for outcome in outcomes]
    assert [attempt.job.id for attempt in attempts if attempt.retry is not None] == [retried.id]
    # Decided once, here; only the retry_for policy is left to decide under the row lock.
    assert [type(attempt.decision).__name__ for attempt in attempts] == ["Retry", "GiveUp", "NoneType"]


def test_the_claim_statement_keeps_error_history_limit_entries_unless_told() -> None:
    [job] = claim_failing("a")
    [retry] = take([failed(job)])
    kept, claimed = claim.succeed_and_claim(
        [],
        None,
        owner=OWNER,
        limit=0,
        lease_seconds=LEASE,
        queues=None,
        retries=retry_params([retry], jobretry_settings.error_history_limit, prefix="retry_"),
    )
    assert (kept, claimed) == ({job.id}, [])
    assert [entry["message"] for entry in Job.objects.get().errors] == ["upstream reset"]
