"""The chaos fault "a cancel during a pause past the lease" and its invariant can fail, for the right reason.

The harness's tables and audit triggers are installed in the test database
(rolled back with the test); a job is claimed by a worker id naming a pid,
as real workers' ids do, and cancelled with the fault's own code while that
worker "is stopped" (it writes nothing). Lease recovery must then bury the
job; the negative control plays what recovery did before issue 17.6 (the job
ready again, the request cleared) and the invariant reports the next claim.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.db.models import DurationField, Value
from django.db.models.functions import Now

from chaos import cancel_pause, schema
from chaos.invariants import no_claim_after_cancel
from django_jobretry.jobs import claim, recovery
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.attempts import claim_one
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db

#: The stopped worker's pid, in its worker id (host:pid:random).
STOPPED = 303


@pytest.fixture(autouse=True)
def harness_tables() -> None:
    schema.install()


def cancel_on_a_stopped_worker() -> int:
    jobs.always_fails.enqueue("a")  # three attempts: a lost request means a retry
    claimed = claim_one(owner=f"host:{STOPPED}:abc")
    rng = random.Random(1)
    assert cancel_pause.busy_worker([1, STOPPED], rng) == STOPPED
    assert cancel_pause.cancel_one(STOPPED, rng) == f"job {claimed.id} cancelled while its worker was stopped"
    past = Now() - Value(timedelta(minutes=1), output_field=DurationField())
    assert Job.objects.filter(pk=claimed.id).update(lease_expires_at=past) == 1
    return claimed.id


def test_a_cancel_on_a_stopped_worker_ends_cancelled_and_the_invariant_holds() -> None:
    job_id = cancel_on_a_stopped_worker()
    [item] = recovery.recover_expired(100, 10)
    assert (item.id, item.reason) == (job_id, "cancelled")
    assert claim.claim("another-worker", 10, 30, None) == []
    check, ends = no_claim_after_cancel()
    assert (check.checked, check.violations, ends) == (1, [], {"cancelled": 1, "otherwise": 0})
    assert DeadLetter.objects.get(job_id=job_id).last_error == f"cancelled by {cancel_pause.ACTOR}"


def test_a_lost_cancel_request_is_reported() -> None:
    job_id = cancel_on_a_stopped_worker()
    # What lease recovery did before: ready again, the lease and the request cleared.
    Job.objects.filter(pk=job_id).update(
        status=JobStatus.READY,
        run_at=Now(),
        lease_owner="",
        lease_token=None,
        lease_expires_at=None,
        cancel_requested_by="",
        cancel_requested_at=None,
    )
    assert [job.id for job in claim.claim("another-worker", 10, 30, None)] == [job_id]
    check, ends = no_claim_after_cancel()
    assert check.checked == 1
    assert [violation.split(" (")[0] for violation in check.violations] == [
        f"job {job_id}: claimed 1 times after its cancel"
    ]
    assert ends == {"cancelled": 0, "otherwise": 1}


def test_nothing_running_on_the_stopped_worker_is_nothing_cancelled() -> None:
    jobs.always_fails.enqueue("a")
    claim_one(owner="host:404:abc")
    assert cancel_pause.cancel_one(STOPPED, random.Random(1)) == "nothing running to cancel"
    assert no_claim_after_cancel()[0].checked == 0
