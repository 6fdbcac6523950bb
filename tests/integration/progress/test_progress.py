"""Progress on the row: its fenced statement, the claim that clears it, the burial that keeps it.

And what ``progress()`` costs and leaves behind when jobs run through
``django_jobretry.testing.run_jobs`` (the runner's own ``_handle``, in the
test's thread and transaction, so CaptureQueriesContext sees every
statement). The same under a real worker: test_progress_workers.py.
"""

from __future__ import annotations

import dataclasses
import re
import time
import uuid

import pytest
from django.db import connection
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext

from django_jobretry import deadletters
from django_jobretry.jobs import progress as progress_module
from django_jobretry.jobs.progress import Progress, Reporter
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.policy import FatalError
from django_jobretry.testing import run_jobs
from tests.attempts import claim_one, record_failure
from tests.jobs_app import jobs, progress_jobs
from tests.jobs_app.models import Execution

pytestmark = pytest.mark.django_db

#: The progress statement, as the captured SQL shows it (the claim's clearing SETs other columns first).
WRITE = re.compile(r"\bSET progress_done = ")
CALLS = 10_000


def shown(row: Job | DeadLetter) -> tuple[int | None, int | None, str | None]:
    return (row.progress_done, row.progress_total, row.progress_note)


def writes(captured: CaptureQueriesContext) -> int:
    return sum(1 for query in captured.captured_queries if WRITE.search(query["sql"]))


def test_a_write_lands_only_while_the_attempt_holds_its_lease() -> None:
    jobs.record.enqueue("k")
    claimed = claim_one()
    assert Reporter(claimed).write(Progress(1, 3, "mine"))
    row = Job.objects.get(pk=claimed.id)
    assert shown(row) == (1, 3, "mine")
    assert row.progress_at is not None

    # Another token (a worker that reclaimed the job), another attempt: the fence matches no row.
    for stale in (dataclasses.replace(claimed, token=uuid.uuid4()), dataclasses.replace(claimed, attempt=2)):
        assert Reporter(stale).write(Progress(2, 3, "stale"))  # nothing refused: nothing matched
    assert shown(Job.objects.get(pk=claimed.id)) == (1, 3, "mine")


def test_a_burial_keeps_the_progress_a_requeue_and_a_new_attempt_start_without() -> None:
    jobs.record.enqueue("k")
    claimed = claim_one()
    Reporter(claimed).write(Progress(7, 10, "row 7"))
    record_failure(claimed, ConnectionResetError("partner down"))
    retrying = Job.objects.get(pk=claimed.id)
    assert (retrying.status, shown(retrying)) == (JobStatus.READY, (7, 10, "row 7"))  # how far it got

    Job.objects.filter(pk=claimed.id).update(run_at=Now())  # its retry due now, not in 10 ms
    again = claim_one()
    assert shown(Job.objects.get(pk=again.id)) == (None, None, None)  # its own attempt, its own progress
    Reporter(again).write(Progress(9, 10, "row 9"))
    record_failure(again, FatalError("row 10 is broken"))
    dead = DeadLetter.objects.get(job_id=claimed.id)
    assert shown(dead) == (9, 10, "row 9")
    assert dead.progress_at is not None

    requeued = deadletters.requeue(dead.pk)
    assert shown(Job.objects.get(pk=requeued.pk)) == (None, None, None)


def test_ten_thousand_calls_cost_a_bounded_number_of_statements_and_the_last_value_shows() -> None:
    queued = progress_jobs.walks_rows.enqueue("k", CALLS)
    started = time.monotonic()
    with CaptureQueriesContext(connection) as captured:
        assert run_jobs().succeeded == 1
    elapsed = time.monotonic() - started
    # The first call, one a second at most, the last value at the end (docs/progress.md).
    assert writes(captured) <= 2 + int(elapsed / progress_module.INTERVAL_SECONDS)
    done = Job.objects.get(pk=queued.pk)
    assert (done.status, shown(done)) == (JobStatus.SUCCEEDED, (CALLS, CALLS, f"k: row {CALLS}"))


def test_negative_control_without_the_interval_every_call_is_a_statement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress_module, "INTERVAL_SECONDS", 0.0)
    progress_jobs.walks_rows.enqueue("k", 200)
    with CaptureQueriesContext(connection) as captured:
        run_jobs()
    assert writes(captured) == 200


def test_a_job_that_dies_keeps_how_far_it_got_on_its_dead_letter() -> None:
    queued = progress_jobs.breaks_at.enqueue("k", 7, 10)
    assert run_jobs().dead == 1
    dead = DeadLetter.objects.get(job_id=queued.pk)
    assert shown(dead) == (7, 10, "k: row 7")  # the last call's value, flushed before the burial


def test_a_lost_lease_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "INTERVAL_SECONDS", 0.0)  # every call would write
    kept = progress_jobs.loses_its_lease.enqueue("kept", False)
    lost = progress_jobs.loses_its_lease.enqueue("lost", True)
    run_jobs()
    assert shown(Job.objects.get(pk=kept.pk)) == (2, 3, "after")  # the control: the second call writes
    row = Job.objects.get(pk=lost.pk)
    assert (row.status, shown(row)) == (JobStatus.RUNNING, (1, 3, "before"))  # not its own any more


def test_a_call_inside_the_jobs_own_transaction_is_written_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "INTERVAL_SECONDS", 0.0)
    queued = progress_jobs.reports_inside_a_transaction.enqueue("k")
    run_jobs()
    assert Execution.objects.filter(key="k:saw 1").exists()  # inside, the row still said 1
    assert shown(Job.objects.get(pk=queued.pk)) == (2, 3, "inside")  # the end of the attempt wrote it


def test_an_async_job_inside_the_tests_transaction_writes_its_last_value_at_the_end() -> None:
    """aprogress() would write through asgiref's thread, whose connection cannot see this test's job."""
    queued = progress_jobs.awaits_rows.enqueue("k", 20)
    with CaptureQueriesContext(connection) as captured:
        assert run_jobs().succeeded == 1
    assert writes(captured) == 1  # the end of the attempt, on the test's connection
    assert shown(Job.objects.get(pk=queued.pk)) == (20, 20, "k: row 20")
