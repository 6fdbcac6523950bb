"""`runworker --pool process` against children that misbehave: they hand their pipe to a helper
process and die, leave SQL running on the server when killed, or ignore SIGTERM.

Real worker processes against real PostgreSQL, with hard deadlines; each
handler records the pid it ran in (tests/jobs_app), which shows where it ran.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from django_jobretry.models import DeadLetter, JobStatus
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution
from tests.processes import Workers, finish, pids, runs, spawn, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _kill_helpers() -> None:
    """Kill the helper processes jobs.forks_and_exits started (each recorded as KEY-helper)."""
    for pid in Execution.objects.filter(key__endswith="-helper").values_list("pid", flat=True):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def helpers(workers: Workers) -> Iterator[None]:
    """Whatever the test saw, no helper outlives it (torn down before ``workers``)."""
    yield
    _kill_helpers()


@pytest.mark.usefixtures("helpers")
def test_a_child_that_dies_is_noticed_even_when_its_helper_holds_the_pipe(workers: Workers) -> None:
    orphaning = jobs.forks_and_exits.enqueue("orphaning")
    after = jobs.record.enqueue("after")
    worker = spawn(workers, "--pool", "process", "--concurrency", "1", "--max-jobs", "4")
    # The helpers sleep 600 s: the worker notices each child's death without waiting for them.
    wait_until(lambda: worker.poll() is not None, timeout=90, what="the worker to exit")
    # Its output ends when the helpers do: they hold multiprocessing's resource tracker, which has it.
    _kill_helpers()
    code, output = finish(worker, timeout=30)
    assert code == 0, output
    dead = DeadLetter.objects.get(job_id=orphaning.pk)
    assert [entry["ended"] for entry in dead.errors] == ["worker_exit"] * 3
    assert "exited with code 1" in dead.last_error
    assert len(pids("orphaning-helper")) == 3
    after.refresh_from_db()
    assert after.status == JobStatus.SUCCEEDED


#: The statement jobs.sleeps_in_sql leaves running when its process is killed.
SLEEP_SQL = "SELECT pg_sleep(600)"


def _sleeping_sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query = %s AND pid <> pg_backend_pid()", [SLEEP_SQL]
        )
        count: int = cursor.fetchone()[0]
    return count


@pytest.fixture
def no_sleeping_sessions_left() -> Iterator[None]:
    """Whatever the test saw, end the sessions it left running (they would outlive the test database)."""
    yield
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE query = %s AND pid <> pg_backend_pid()",
            [SLEEP_SQL],
        )


@pytest.mark.usefixtures("no_sleeping_sessions_left")
def test_a_child_killed_at_its_time_limit_leaves_no_statement_running(workers: Workers) -> None:
    job = jobs.sleeps_in_sql.enqueue("in-sql")
    worker = spawn(workers, "--pool", "process", "--concurrency", "1", "--max-jobs", "3")
    code, output = finish(worker, timeout=90)
    assert code == 0, output
    dead = DeadLetter.objects.get(job_id=job.pk)
    assert [entry["ended"] for entry in dead.errors] == ["timeout"] * 3
    assert len(set(pids("in-sql"))) == 3
    # Each kill ended its child's session too: no attempt left one behind.
    assert _sleeping_sessions() == 0


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie no longer does)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_child_that_ignores_sigterm_is_killed_before_the_worker_exits(workers: Workers) -> None:
    job = jobs.ignores_sigterm.enqueue("stubborn", 60)
    worker = spawn(workers, "--pool", "process", "--concurrency", "1", "--shutdown-timeout", "0.5")
    wait_until(lambda: runs("stubborn") == 1, timeout=60, what="the job to start in a child")
    [child] = pids("stubborn")
    worker.send_signal(signal.SIGTERM)
    # Far less than the handler's 60 s: the worker does not wait for its child.
    code, output = finish(worker, timeout=30)
    assert code == 0, output
    assert not _alive(child), "the child that ignored SIGTERM outlived its worker"
    job.refresh_from_db()
    # The run is over (its process reaped), so the job is ready again at once.
    assert (job.status, job.attempts) == (JobStatus.READY, 1)
    assert [(entry["attempt"], entry["ended"], entry["delay"]) for entry in job.errors] == [
        (1, "shutdown", 0)
    ]
    # Another worker runs it once more, with the first run surely over.
    code, output = finish(spawn(workers, "--burst"), timeout=60)
    assert code == 0, output
    job.refresh_from_db()
    assert (job.status, job.attempts, runs("stubborn")) == (JobStatus.SUCCEEDED, 2, 2)


def test_a_child_does_not_outlive_a_worker_killed_with_sigkill(workers: Workers) -> None:
    job = jobs.sleepy.enqueue("orphaned", 60)
    worker = spawn(workers, "--pool", "process", "--concurrency", "1")
    wait_until(lambda: runs("orphaned") == 1, timeout=60, what="the job to start in a child")
    [child] = pids("orphaned")
    worker.kill()  # no exit handler runs
    try:
        wait_until(lambda: not _alive(child), timeout=10, what="the child to die with its worker")
    finally:
        with contextlib.suppress(ProcessLookupError):  # an orphan would outlive the test database
            os.kill(child, signal.SIGKILL)
    code, output = finish(worker, timeout=30)
    assert code == -signal.SIGKILL, output
    job.refresh_from_db()
    # Its lease expires and another worker runs it: with the first run surely over.
    assert (job.status, job.attempts) == (JobStatus.RUNNING, 1)
