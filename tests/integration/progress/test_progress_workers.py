"""``progress()`` under real worker processes, the thread pool and the process pool (its children write).

The statements are counted in the database, whichever process sends them:
a trigger on the jobs table notes each statement that writes progress, with
the job id its fence names, as an Execution row. The jobs are
tests/jobs_app/progress_jobs.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import pytest
from django.db import connection

from django_jobretry.jobs.progress import INTERVAL_SECONDS
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.jobs_app import progress_jobs
from tests.jobs_app.models import Execution
from tests.processes import Workers, finish, spawn, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

CALLS = 10_000
JOB = Job._meta.db_table
EXECUTION = Execution._meta.db_table
#: The job id in the fence of the statement (its ONE_FENCED), as the client sends it bound.
FENCED_ID = r"\(SELECT (\d+)::bigint AS id"


@pytest.fixture
def statements() -> Iterator[Callable[[int], int]]:
    """How many statements wrote the progress of a job (by id), counted by a trigger while the test runs.

    Statement-level, so a statement whose fence matched no row counts too;
    the claim, which clears the columns, does not (its SET starts elsewhere).
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            CREATE FUNCTION test_progress_statement() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF current_query() ~ 'SET progress_done = ' THEN
                    INSERT INTO {EXECUTION} (key, attempt, pid, created_at)
                    VALUES ('progress:' || COALESCE(substring(current_query() FROM '{FENCED_ID}'), '?'),
                            0, pg_backend_pid(), now());
                END IF;
                RETURN NULL;
            END $$;
            CREATE TRIGGER test_progress_statement AFTER UPDATE OF progress_done ON {JOB}
                FOR EACH STATEMENT EXECUTE FUNCTION test_progress_statement();
            """
        )
    try:
        yield lambda job_id: Execution.objects.filter(key=f"progress:{job_id}").count()
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                f"DROP TRIGGER test_progress_statement ON {JOB}; DROP FUNCTION test_progress_statement();"
            )


def shown(row: Job | DeadLetter) -> tuple[int | None, int | None, str | None]:
    return (row.progress_done, row.progress_total, row.progress_note)


def noted(prefix: str) -> str:
    """The rest of the one Execution key a job noted starting with ``prefix``."""
    [key] = Execution.objects.filter(key__startswith=prefix).values_list("key", flat=True)
    return key.removeprefix(prefix)


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_progress_shows_while_a_job_runs_bounded_and_after_it_ended_or_died(
    workers: Workers, statements: Callable[[int], int], pool: str
) -> None:
    waiting = progress_jobs.reports_then_waits.enqueue("w", 3, 10, "copying invoices")
    walked = progress_jobs.walks_rows.enqueue("k", CALLS)
    broken = progress_jobs.breaks_at.enqueue("b", 7, 10)
    awaited = progress_jobs.walks_rows_async.enqueue("a", 50)
    kept = progress_jobs.reports_synchronously_in_a_loop.enqueue("s", 5)
    worker = spawn(workers, "--pool", pool, "--concurrency", "1", "--burst")

    # Seen from here while the job still runs: the first call is written at once.
    wait_until(
        lambda: shown(Job.objects.get(pk=waiting.pk)) == (3, 10, "copying invoices"),
        timeout=60,
        what="the running job's progress",
    )
    assert Job.objects.get(pk=waiting.pk).status == JobStatus.RUNNING
    Execution.objects.create(key="w:seen", attempt=0, pid=0)
    code, output = finish(worker, timeout=120)
    assert code == 0, output

    done = Job.objects.get(pk=walked.pk)
    assert (done.status, shown(done)) == (JobStatus.SUCCEEDED, (CALLS, CALLS, f"k: row {CALLS}"))
    took = float(noted("k:seconds "))
    # 10,000 calls: the first, one a second at most, the last at the end (docs/progress.md).
    assert statements(walked.pk) <= 2 + math.floor(took / INTERVAL_SECONDS)
    assert statements(waiting.pk) == 1  # one call: written at once, nothing left for the end

    dead = DeadLetter.objects.get(job_id=broken.pk)
    assert shown(dead) == (7, 10, "b: row 7")
    assert statements(broken.pk) == 2  # the first call, and the last value before the burial

    assert noted("a:") == "saw 1"  # aprogress wrote the first value while the coroutine ran
    assert shown(Job.objects.get(pk=awaited.pk)) == (50, 50, "a: row 50")
    assert shown(Job.objects.get(pk=kept.pk)) == (5, None, "s")  # kept in the loop, written at the end
