"""`runworker --pool process` against children that misbehave: they hand their pipe to a helper
process and die.

Real worker processes against real PostgreSQL, with hard deadlines; each
handler records the pid it ran in (tests/jobs_app), which shows where it ran.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

import pytest

from django_jobretry.models import DeadLetter, JobStatus
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution
from tests.processes import Workers, finish, pids, spawn, wait_until

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
