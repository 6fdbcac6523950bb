"""The chaos harness's stale-completion invariant (chaos/stale.py) can fail, and fails for the right ends.

A soak that prints "0 stale completions accepted" proves something only if
the check reports an accepted stale completion when there is one. These
tests install the harness's audit triggers and ledger in the test database
(rolled back with the test), play the attempts of one job as two chaos
worker processes would (each write from a session named ``chaos-<pid>``,
as chaos/settings.py names them), plant stale completions that the product's
fence would refuse by giving the stale writer the current attempt's fence,
and assert what the invariant reports. Real PostgreSQL, real triggers, the
worker's own transition statements.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import DurationField, Value
from django.db.models.functions import Now

from chaos import schema
from chaos.stale import stale_completions
from django_jobretry import FatalError
from django_jobretry.conf import jobretry_settings
from django_jobretry.jobs import recovery
from django_jobretry.jobs.claimed import ClaimedJob, bury, succeed
from django_jobretry.jobs.history import AttemptEnd, AttemptEntry, error_entry, render_error
from django_jobretry.models import DeadLetter, DeadReason, Job, JobStatus
from django_jobretry.policy import ErrorKind
from tests.attempts import claim_one, record_failure
from tests.factories import JobFactory
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db

#: Two worker processes, as the harness names their sessions.
FIRST, SECOND = 101, 202


@pytest.fixture(autouse=True)
def harness_tables() -> None:
    """The ledger, the audit and its triggers, inside the test's transaction."""
    schema.install()


def as_worker(pid: int) -> None:
    """What follows on this connection is written by chaos worker ``pid`` (until the test ends)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('application_name', %s, true)", [f"chaos-{pid}"])


def claim_as(pid: int) -> ClaimedJob:
    as_worker(pid)
    return claim_one(owner=f"worker-{pid}")


def start_handler(claimed: ClaimedJob, pid: int) -> int:
    """The ledger row chaos/jobs.py writes when the handler starts; its id."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO chaos_attempt (job_id, attempt, pid) VALUES (%s, %s, %s) RETURNING id",
            [claimed.id, claimed.attempt, pid],
        )
        return int(cursor.fetchone()[0])


def end_handler(ledger_id: int) -> None:
    """The ledger row closed when the handler returns or raises."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE chaos_attempt SET ended_at = clock_timestamp() WHERE id = %s", [ledger_id])


def lose_lease(job_id: int, *, recovered_by: int) -> None:
    """The holder stopped heartbeating: its lease runs out and another worker recovers the job."""
    past = Now() - Value(timedelta(minutes=1), output_field=DurationField())
    Job.objects.filter(pk=job_id).update(lease_expires_at=past)
    as_worker(recovered_by)
    recovered = recovery.recover_expired(10, jobretry_settings.error_history_limit)
    assert [(r.id, r.buried) for r in recovered] == [(job_id, False)]
    Job.objects.filter(pk=job_id).update(run_at=Now())  # the retry's backoff, skipped


def with_fence_of(stale: ClaimedJob, current: ClaimedJob) -> ClaimedJob:
    """The stale attempt as a broken fence would let it through: holding the current fence."""
    return replace(stale, attempt=current.attempt, token=current.token)


def fatal_entry(attempt: int, pid: int) -> AttemptEntry:
    error = render_error(FatalError("payload is invalid"))
    return error_entry(attempt, error, ErrorKind.FATAL, AttemptEnd.FATAL, f"worker-{pid}")


def recovered_then_reclaimed(*, reclaimed_by: int) -> tuple[ClaimedJob, ClaimedJob, int]:
    """Attempt 1 on FIRST, its lease lost (recovered by SECOND), attempt 2 claimed by ``reclaimed_by``.

    Returns (attempt 1, attempt 2, attempt 2's ledger row). Attempt 1's
    handler is still running, as after a SIGSTOP past the lease.
    """
    jobs.record.enqueue("k")
    first = claim_as(FIRST)
    start_handler(first, FIRST)
    lose_lease(first.id, recovered_by=SECOND)
    second = claim_as(reclaimed_by)
    assert (second.id, second.attempt) == (first.id, 2)
    return first, second, start_handler(second, reclaimed_by)


def test_fenced_run_has_no_stale_completion_and_every_end_is_checked() -> None:
    # Job a: a stale success refused by the fence; the new holder's own success.
    first, second, ledger = recovered_then_reclaimed(reclaimed_by=SECOND)
    as_worker(FIRST)
    assert succeed([first]) == set()
    end_handler(ledger)
    as_worker(SECOND)
    assert succeed([second]) == {second.id}
    # Job b: its holder's retry, then its holder's burial (a fatal error on attempt 2).
    jobs.record.enqueue("b")
    retried = claim_as(SECOND)
    end_handler(start_handler(retried, SECOND))
    record_failure(retried, ConnectionResetError("reset"), owner=f"worker-{SECOND}")
    Job.objects.filter(pk=retried.id).update(run_at=Now())
    buried = claim_as(FIRST)
    end_handler(start_handler(buried, FIRST))
    record_failure(buried, FatalError("bad"), owner=f"worker-{FIRST}")

    check = stale_completions()

    assert Job.objects.get(pk=second.id).status == JobStatus.SUCCEEDED
    assert DeadLetter.objects.get(job_id=buried.id).reason == DeadReason.FATAL
    # Three ends: a's success, b's retry and b's burial; a's lease recovery is not the holder's end.
    assert (check.name, check.checked, check.violations) == ("stale completions accepted", 3, [])


def test_a_success_accepted_from_another_process_is_reported() -> None:
    first, second, _ = recovered_then_reclaimed(reclaimed_by=SECOND)
    as_worker(FIRST)
    assert succeed([with_fence_of(first, second)]) == {first.id}

    check = stale_completions()

    assert Job.objects.get(pk=first.id).status == JobStatus.SUCCEEDED
    assert check.checked == 1
    assert check.violations == [
        f"job {first.id} attempt 2: success written by chaos-{FIRST}; chaos-{SECOND} claimed that attempt"
    ]


def test_a_burial_accepted_from_another_process_is_reported() -> None:
    first, second, _ = recovered_then_reclaimed(reclaimed_by=SECOND)
    as_worker(FIRST)
    stale = with_fence_of(first, second)
    entry = fatal_entry(2, FIRST)
    assert bury(stale, entry, DeadReason.FATAL, 10) is not None

    check = stale_completions()

    assert check.checked == 1
    assert check.violations == [
        f"job {first.id} attempt 2: burial (fatal) written by chaos-{FIRST}; "
        f"chaos-{SECOND} claimed that attempt"
    ]


def test_a_stale_failure_of_the_same_process_is_reported_by_its_entry() -> None:
    first, second, _ = recovered_then_reclaimed(reclaimed_by=FIRST)
    # The worker of attempt 1, now also holding attempt 2, buries attempt 1's fatal error.
    entry = fatal_entry(first.attempt, FIRST)
    stale = with_fence_of(first, second)
    assert bury(stale, entry, DeadReason.FATAL, 10) is not None

    check = stale_completions()

    assert check.checked == 1
    assert check.violations == [
        f"job {first.id} attempt 2: burial (fatal): its history entry is for attempt 1"
    ]


def test_a_stale_success_of_the_same_process_is_reported_by_the_ledger() -> None:
    first, second, ledger = recovered_then_reclaimed(reclaimed_by=FIRST)
    # Attempt 1's handler returns; its success lands on attempt 2, whose handler is still running.
    assert succeed([with_fence_of(first, second)]) == {first.id}
    end_handler(ledger)

    check = stale_completions()

    assert check.checked == 1
    assert len(check.violations) == 1
    assert check.violations[0].startswith(
        f"job {first.id} attempt 2: success accepted while the attempt's handler still ran ("
    )


def test_an_end_of_a_job_never_claimed_is_reported() -> None:
    row = JobFactory.create(running=True)  # inserted as running: no claim in the audit
    assert row.lease_token is not None
    as_worker(FIRST)
    held = ClaimedJob(
        row.pk, row.task_name, row.queue_name, row.policy_name, "[]", "{}", 1, 3, row.lease_token, row.pk, 0
    )
    assert succeed([held]) == {row.pk}

    check = stale_completions()

    assert check.violations == [
        f"job {row.pk} attempt 1: success by chaos-{FIRST}, and no claim of the job before it"
    ]


def test_an_end_of_an_attempt_other_than_the_last_claimed_is_reported() -> None:
    jobs.record.enqueue("k")
    claimed = claim_as(FIRST)
    Job.objects.filter(pk=claimed.id).update(attempts=2)  # by hand: attempt 2 was never claimed
    assert succeed([replace(claimed, attempt=2)]) == {claimed.id}

    check = stale_completions()

    assert check.violations == [
        f"job {claimed.id} attempt 2: success by chaos-{FIRST}, but the last claim was attempt 1"
    ]
