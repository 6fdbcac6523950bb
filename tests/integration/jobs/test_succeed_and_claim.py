"""``claim.succeed_and_claim``: a job's success and the next claim in one statement.

The worker at ``--concurrency 1`` records each success this way, so the
statement must keep both halves' rules: the success is fenced by attempt and
lease token (docs/design.md#rule-3) and the claim counts the attempt
(docs/design.md#rule-1), in the claim's order.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_jobretry.jobs import claim, statements
from django_jobretry.jobs.claimed import ClaimedJob
from django_jobretry.jobs.sql import FENCE
from django_jobretry.models import Job, JobStatus
from tests.attempts import OWNER, claim_one
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db


def succeed_and_claim(
    done: list[ClaimedJob], limit: int = 10, queues: list[str] | None = None
) -> tuple[set[int], list[ClaimedJob]]:
    return claim.succeed_and_claim(done, None, owner=OWNER, limit=limit, lease_seconds=30, queues=queues)


def test_one_statement_records_the_success_and_claims_in_claim_order() -> None:
    first = jobs.record.enqueue("first")
    running = claim_one()
    low = jobs.record.using(priority=-1).enqueue("low")
    plain = jobs.record.enqueue("plain")
    high = jobs.record.using(priority=5).enqueue("high")
    with CaptureQueriesContext(connection) as queries:
        succeeded, claimed = succeed_and_claim([running])
    assert len(queries) == 1
    assert succeeded == {first.pk}
    assert [job.id for job in claimed] == [high.pk, plain.pk, low.pk]
    assert [job.attempt for job in claimed] == [1, 1, 1]
    rows = {row.pk: row for row in Job.objects.all()}
    assert (rows[first.pk].status, rows[first.pk].lease_token) == (JobStatus.SUCCEEDED, None)
    assert all(rows[job.id].status == JobStatus.RUNNING for job in claimed)
    assert all(rows[job.id].lease_token == job.token for job in claimed)


def test_a_stale_success_changes_nothing_and_the_claim_still_happens() -> None:
    jobs.record.enqueue("held")
    running = claim_one()
    waiting = jobs.record.enqueue("waiting")
    stale = replace(running, token=uuid.uuid4())  # another worker's lease now
    succeeded, claimed = succeed_and_claim([stale])
    assert succeeded == set()
    assert [job.id for job in claimed] == [waiting.pk]
    row = Job.objects.get(pk=running.id)
    assert (row.status, row.lease_token, row.finished_at) == (JobStatus.RUNNING, running.token, None)


def test_nothing_due_still_records_the_success() -> None:
    jobs.record.enqueue("only")
    running = claim_one()
    jobs.record.using(run_after=timedelta(hours=1)).enqueue("later")
    succeeded, claimed = succeed_and_claim([running])
    assert (succeeded, claimed) == ({running.id}, [])
    assert Job.objects.get(pk=running.id).status == JobStatus.SUCCEEDED


def test_the_claim_keeps_its_limit_and_queue_filter() -> None:
    jobs.record.enqueue("a")
    running = claim_one()
    jobs.other_queue.enqueue("elsewhere")
    mine = [jobs.record.enqueue(f"k{i}") for i in range(3)]
    succeeded, claimed = succeed_and_claim([running], limit=2, queues=["default"])
    assert succeeded == {running.id}
    assert [job.id for job in claimed] == [mine[0].pk, mine[1].pk]
    assert Job.objects.filter(status=JobStatus.READY).count() == 2  # one mine, one on "other"


def test_the_stale_test_catches_an_unfenced_success(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: SUCCEEDED fenced by status only lets the stale success through."""
    unfenced = statements.SUCCEEDED.replace(FENCE, "j.status = 'running'")
    assert unfenced != statements.SUCCEEDED, "the control no longer breaks the fence: update it"
    monkeypatch.setattr(statements, "SUCCEEDED", unfenced)
    with pytest.raises(AssertionError):
        test_a_stale_success_changes_nothing_and_the_claim_still_happens()
