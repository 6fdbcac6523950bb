"""Step definitions for limits.feature: two workers' limited claims on the real database, in process."""

from __future__ import annotations

import pytest
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry.jobs import claim
from django_jobretry.jobs.claimed import ClaimedJob, succeed
from django_jobretry.limits import claim_limits
from django_jobretry.models import Job, JobStatus
from tests.jobs_app import limited_jobs

pytestmark = pytest.mark.django_db

scenarios("limits.feature")

WORKERS = ("worker-a", "worker-b")


@pytest.fixture
def claimed() -> list[ClaimedJob]:
    """Every job the workers claimed, in claim order."""
    return []


def claim_all(claimed: list[ClaimedJob]) -> None:
    limits = claim_limits()
    assert limits is not None
    for worker in WORKERS:
        claimed += claim.claim_limited(worker, 10, 60, None, limits)[0]


@given(parsers.parse("{first:d} jobs of tenant 1 and {second:d} job of tenant 2, one at a time per tenant"))
def tenants(first: int, second: int) -> None:
    limited_jobs.one_per_tenant.bulk_enqueue([((1, 0), {})] * first + [((2, 0), {})] * second)


@given(parsers.parse("{count:d} jobs limited to three at once"))
def three_at_once(count: int) -> None:
    limited_jobs.three_at_once.bulk_enqueue([((f"f-{n}", 0), {}) for n in range(count)])


@when("two workers claim as many jobs as they can")
def two_workers_claim(claimed: list[ClaimedJob]) -> None:
    claim_all(claimed)


@when("the running job of tenant 1 succeeds and the workers claim again")
def tenant_one_succeeds(claimed: list[ClaimedJob]) -> None:
    lane = dict(Job.objects.filter(status=JobStatus.RUNNING).values_list("pk", "limit_lane"))
    done = [job for job in claimed if lane.get(job.id) == "key:tenant:1"]
    assert succeed(done) == {done[0].id}
    claim_all(claimed)


@then(parsers.parse("1 job of tenant 1 and 1 job of tenant 2 are running"))
def one_per_tenant_running() -> None:
    running = Job.objects.filter(status=JobStatus.RUNNING)
    assert sorted(str(lane) for lane in running.values_list("limit_lane", flat=True)) == [
        "key:tenant:1",
        "key:tenant:2",
    ]


@then(parsers.parse("{count:d} jobs are running"))
def jobs_running(count: int) -> None:
    assert Job.objects.filter(status=JobStatus.RUNNING).count() == count


@then(parsers.re(r"(?P<count>\d+) jobs? waits? with no attempt spent"), converters={"count": int})
def waiting(count: int) -> None:
    ready = Job.objects.filter(status=JobStatus.READY)
    assert list(ready.values_list("attempts", flat=True)) == [0] * count
