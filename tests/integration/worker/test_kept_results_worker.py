"""Kept results on the real worker (docs/results.md): in the success's own statement, and from a child.

The burst runs the worker's main loop in this process, whose statements are
counted (tests/inprocess.py); the process pool is a real `manage.py
runworker --pool process`, with a hard deadline.
"""

from __future__ import annotations

import pytest

from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.inprocess import run_burst
from tests.integration.worker.test_worker_inprocess import FIXED_QUERIES
from tests.jobs_app import result_jobs
from tests.processes import Workers, finish, spawn

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.usefixtures("keep_signal_handlers")
def test_a_kept_result_is_written_by_the_statement_that_records_the_success() -> None:
    count = 20
    jobs = [result_jobs.total.enqueue([index, 1]) for index in range(count)]
    queries = run_burst(concurrency=1)
    assert [job.result() for job in jobs] == [{"total": index + 1, "items": 2} for index in range(count)]
    # As for any job (test_worker_inprocess.py): each later claim carries the previous success.
    assert sum("WITH done AS" in q for q in queries) == count, "\n".join(queries)
    assert len(queries) <= count + 1 + FIXED_QUERIES, "\n".join(queries)


def test_a_child_process_keeps_a_result_and_fails_on_one_too_large(workers: Workers) -> None:
    kept = result_jobs.total.enqueue([5, 6])
    too_large = result_jobs.text_of.enqueue(70_000)
    dropped = result_jobs.total_not_kept.enqueue([5, 6])
    worker = spawn(workers, "--pool", "process", "--concurrency", "2", "--burst")
    code, output = finish(worker, timeout=90)
    assert code == 0, output
    assert kept.result() == {"total": 11, "items": 2}
    assert Job.objects.get(pk=dropped.pk).status == JobStatus.SUCCEEDED
    assert Job.objects.filter(pk=dropped.pk, return_value__isnull=True).exists()
    dead = DeadLetter.objects.get(job_id=too_large.pk)
    assert (dead.reason, dead.attempts) == ("fatal", 1)
    assert "70002 bytes as JSON; the limit is 65536" in dead.last_error
    assert "xxxx" not in output  # the value is never logged
