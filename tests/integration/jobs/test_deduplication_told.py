"""An enqueue says whether it was deduplicated (issue 36): ``job.deduplicated`` and ``job_deduplicated``.

Before, a caller got the job holding its key back with nothing to tell it
from a new one, even a job that had already succeeded. Windows are moved by
the database clock (a job's ``finished_at`` set back), never by sleeping.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.db.models.functions import Now

from django_jobretry import signals
from django_jobretry.exceptions import JobConflict
from django_jobretry.models import Job, JobStatus
from django_jobretry.testing import run_jobs
from tests.jobs_app import jobs, unique_jobs

pytestmark = pytest.mark.django_db

PRIVATE_NOTE = "card 4111-1111-1111-1111"


@pytest.fixture
def deduplicated() -> Iterator[list[dict[str, Any]]]:
    """Every ``job_deduplicated`` sent, with its sender."""
    sent: list[dict[str, Any]] = []

    def record(sender: Any, signal: Any, **kwargs: Any) -> None:
        sent.append({"sender": sender, **kwargs})

    signals.job_deduplicated.connect(record, dispatch_uid="test-deduplicated")
    yield sent
    signals.job_deduplicated.disconnect(dispatch_uid="test-deduplicated")


class TestTheReturnedJob:
    def test_a_fresh_enqueue_is_not_deduplicated(self, deduplicated: list[dict[str, Any]]) -> None:
        first = unique_jobs.receipt.enqueue(7)
        plain = jobs.record.enqueue("no key")
        assert (first.deduplicated, plain.deduplicated) == (False, False)
        assert deduplicated == []

    def test_a_second_enqueue_of_the_key_is_deduplicated_and_names_the_holder(
        self, deduplicated: list[dict[str, Any]]
    ) -> None:
        first = unique_jobs.receipt.enqueue(7)
        again = unique_jobs.receipt.enqueue(7, note=PRIVATE_NOTE)
        assert (again.deduplicated, again.pk, again.status) == (True, first.pk, JobStatus.READY)
        assert deduplicated == [
            {
                "sender": Job,
                "job_id": first.pk,
                "task_name": "tests.jobs_app.unique_jobs.receipt",
                "queue_name": "default",
                "unique_key": first.unique_key,
                "status": JobStatus.READY,
                "replaced": False,
            }
        ]
        assert PRIVATE_NOTE not in json.dumps(deduplicated, default=str), "the signal carries no argument"
        assert Job.objects.count() == 1

    def test_a_job_that_already_succeeded_within_unique_for_is_told_as_such(
        self, deduplicated: list[dict[str, Any]]
    ) -> None:
        first = unique_jobs.invoice.enqueue(9)
        assert run_jobs().succeeded == 1
        again = unique_jobs.invoice.enqueue(9)
        assert (again.deduplicated, again.pk, again.status) == (True, first.pk, JobStatus.SUCCEEDED)
        assert [(s["job_id"], s["status"]) for s in deduplicated] == [(first.pk, JobStatus.SUCCEEDED)]
        Job.objects.filter(pk=first.pk).update(finished_at=Now() - timedelta(minutes=61))
        later = unique_jobs.invoice.enqueue(9)
        assert (later.deduplicated, later.pk != first.pk) == (False, True)
        assert len(deduplicated) == 1

    def test_the_signal_is_sent_once_per_deduplicated_enqueue(
        self, deduplicated: list[dict[str, Any]]
    ) -> None:
        first = unique_jobs.receipt.enqueue(7)
        other = unique_jobs.receipt.enqueue(8)
        for _ in range(3):
            unique_jobs.receipt.enqueue(7)
        unique_jobs.receipt.enqueue(8)
        assert [s["job_id"] for s in deduplicated] == [first.pk] * 3 + [other.pk]

    def test_a_using_key_is_told_too(self, deduplicated: list[dict[str, Any]]) -> None:
        keyed = jobs.record.using(unique_key="nightly", priority=3)
        first, again = keyed.enqueue("a"), keyed.enqueue("b")
        assert (first.deduplicated, again.deduplicated, again.pk) == (False, True, first.pk)
        assert [(s["job_id"], s["unique_key"]) for s in deduplicated] == [(first.pk, "nightly")]

    def test_a_job_read_from_the_database_is_not_marked(self) -> None:
        first = unique_jobs.receipt.enqueue(7)
        assert unique_jobs.receipt.enqueue(7).deduplicated
        assert Job.objects.get(pk=first.pk).deduplicated is False

    def test_inside_a_transaction_the_holder_is_the_transactions_own_job(
        self, deduplicated: list[dict[str, Any]]
    ) -> None:
        with transaction.atomic():
            first = unique_jobs.invoice.enqueue(4)
            again = unique_jobs.invoice.enqueue(4)
        assert (first.deduplicated, again.deduplicated, again.pk) == (False, True, first.pk)
        assert [s["job_id"] for s in deduplicated] == [first.pk]

    def test_a_failing_receiver_does_not_fail_the_enqueue(self, caplog: pytest.LogCaptureFixture) -> None:
        def broken(sender: Any, **kwargs: Any) -> None:
            raise RuntimeError("receiver bug")

        first = unique_jobs.receipt.enqueue(7)
        signals.job_deduplicated.connect(broken, dispatch_uid="test-broken")
        try:
            again = unique_jobs.receipt.enqueue(7)
        finally:
            signals.job_deduplicated.disconnect(dispatch_uid="test-broken")
        assert (again.pk, again.deduplicated) == (first.pk, True)
        [line] = [r for r in caplog.records if getattr(r, "outcome", None) == "signal_error"]
        assert line.job_id == first.pk  # type: ignore[attr-defined]


class TestConflictModes:
    def test_raise_raises_and_sends_nothing(self, deduplicated: list[dict[str, Any]]) -> None:
        first = unique_jobs.refund.enqueue(5)
        with pytest.raises(JobConflict) as refused:
            unique_jobs.refund.enqueue(5)
        assert refused.value.job_id == first.pk
        assert deduplicated == [], "the caller is told by the exception"

    def test_replace_of_a_ready_job_is_deduplicated_and_replaced(
        self, deduplicated: list[dict[str, Any]]
    ) -> None:
        first = unique_jobs.sync.enqueue(3, "monday")
        later = unique_jobs.sync.enqueue(3, since="tuesday")
        assert (later.deduplicated, later.pk, later.kwargs) == (True, first.pk, {"since": "tuesday"})
        assert [(s["job_id"], s["replaced"]) for s in deduplicated] == [(first.pk, True)]

    def test_replace_of_a_running_job_returns_it_unreplaced(self, deduplicated: list[dict[str, Any]]) -> None:
        first = unique_jobs.sync.enqueue(3, "monday")
        running = {"status": JobStatus.RUNNING, "lease_token": uuid.uuid4(), "lease_expires_at": Now()}
        Job.objects.filter(pk=first.pk).update(**running)
        again = unique_jobs.sync.enqueue(3, "tuesday")
        assert (again.deduplicated, again.pk, again.args) == (True, first.pk, [3, "monday"])
        assert [(s["job_id"], s["status"], s["replaced"]) for s in deduplicated] == [
            (first.pk, JobStatus.RUNNING, False)
        ]
