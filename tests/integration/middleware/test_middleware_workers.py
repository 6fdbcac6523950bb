"""JOBRETRY["MIDDLEWARE"] in real worker processes, with the thread and the process pool.

Worker processes read the list from JOBRETRY_TEST_MIDDLEWARE (tests/settings.py);
the middleware (tests/jobs_app/middleware.py) write Execution rows, so the
order, the outcomes and the process they ran in are read back from the database.
"""

from __future__ import annotations

import json

import pytest

from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.jobs_app import async_jobs, jobs
from tests.jobs_app.models import Execution
from tests.processes import Workers, finish, spawn

pytestmark = pytest.mark.django_db(transaction=True)

MW = "tests.jobs_app.middleware"


def environment(*names: str) -> dict[str, str]:
    return {"JOBRETRY_TEST_MIDDLEWARE": json.dumps([f"{MW}.{name}" for name in names])}


def rows(job_id: int) -> list[tuple[str, int]]:
    """(key without the job id, pid) of the rows the middleware wrote for ``job_id``, in order."""
    found = Execution.objects.filter(key__endswith=f":{job_id}").order_by("id").values_list("key", "pid")
    return [(key.rpartition(":")[0], pid) for key, pid in found]


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_the_chain_runs_in_order_and_a_broken_middleware_costs_an_attempt_not_the_worker(
    workers: Workers, pool: str
) -> None:
    broken = jobs.noop.enqueue()  # `broken` raises before call_next for it
    reset = jobs.always_fails.enqueue("reset")  # `fatal_on_reset` makes its error fatal
    ordered = jobs.record.enqueue("ordered")
    chain = environment("outer", "inner", "broken", "fatal_on_reset")
    worker = spawn(workers, "--pool", pool, "--concurrency", "1", "--max-jobs", "3", env=chain)
    code, output = finish(worker, timeout=90)
    assert code == 0, output

    [(_, ran_in)] = Execution.objects.filter(key="ordered").values_list("key", "pid")
    assert (ran_in == worker.pid) is (pool == "thread")  # the process pool runs it in a child
    assert rows(ordered.pk) == [
        ("outer:enter", ran_in),
        ("inner:enter", ran_in),
        ("inner:returned", ran_in),
        ("outer:returned", ran_in),
    ]
    assert Job.objects.get(pk=ordered.pk).status == JobStatus.SUCCEEDED

    assert [key for key, _ in rows(broken.pk)] == [
        "outer:enter",
        "inner:enter",
        "inner:RuntimeError",
        "outer:RuntimeError",
    ]
    failed = Job.objects.get(pk=broken.pk)
    assert (failed.status, failed.attempts, len(failed.errors)) == (JobStatus.READY, 1, 1)
    assert failed.errors[0]["message"] == "broken middleware before call_next"
    assert "in broken" in failed.errors[0]["traceback"]

    dead = DeadLetter.objects.get(job_id=reset.pk)
    assert (dead.reason, dead.attempts) == ("fatal", 1)
    assert dead.last_error_class == "django_jobretry.exceptions.FatalError"
    assert [key for key, _ in rows(reset.pk)][-1] == "outer:FatalError"


def test_a_worker_refuses_to_start_with_a_middleware_that_does_not_import(workers: Workers) -> None:
    untouched = jobs.record.enqueue("untouched")
    bad = environment("outer", "no_such_middleware")
    code, output = finish(spawn(workers, "--burst", env=bad), timeout=60)
    assert code != 0
    assert "django_jobretry.E018" in output
    assert "cannot import 'tests.jobs_app.middleware.no_such_middleware'" in output
    assert "Traceback" not in output
    assert Job.objects.get(pk=untouched.pk).attempts == 0
    assert not Execution.objects.exists()


def test_the_same_worker_without_middleware_runs_the_job_alone(workers: Workers) -> None:
    """Negative control for the rows above: they come from the middleware, not from the job."""
    plain = jobs.record.enqueue("plain")
    code, output = finish(spawn(workers, "--concurrency", "1", "--max-jobs", "1"), timeout=60)
    assert code == 0, output
    assert rows(plain.pk) == []
    assert list(Execution.objects.values_list("key", flat=True)) == ["plain"]


def test_on_the_event_loop_async_and_plain_middleware_see_the_coroutines_outcome(workers: Workers) -> None:
    """``around`` is ``async def``; ``outer``, ``broken`` and ``fatal_on_reset`` are plain, run in threads."""
    ordered = async_jobs.awaits.enqueue("ordered", 0)
    broken = async_jobs.noop.enqueue()  # `broken` raises before call_next for it
    reset = async_jobs.resets.enqueue("partner")  # `fatal_on_reset` makes its error fatal
    in_thread = jobs.record.enqueue("in-thread")  # `around` adapted around a plain job
    chain = environment("around", "outer", "broken", "fatal_on_reset")
    worker = spawn(workers, "--max-jobs", "4", env=chain)
    code, output = finish(worker, timeout=90)
    assert code == 0, output

    for job in (ordered, in_thread):
        assert rows(job.pk) == [
            ("around:enter", worker.pid),
            ("outer:enter", worker.pid),
            ("outer:returned", worker.pid),
            ("around:returned", worker.pid),
        ]
        assert Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED
    assert [key for key, _ in rows(broken.pk)] == [
        "around:enter",
        "outer:enter",
        "outer:RuntimeError",
        "around:RuntimeError",
    ]
    failed = Job.objects.get(pk=broken.pk)
    assert (failed.status, failed.attempts) == (JobStatus.READY, 1)
    assert failed.errors[0]["message"] == "broken middleware before call_next"
    assert "in broken" in failed.errors[0]["traceback"]
    dead = DeadLetter.objects.get(job_id=reset.pk)
    assert (dead.reason, dead.attempts) == ("fatal", 1)
    assert [key for key, _ in rows(reset.pk)][-1] == "around:FatalError"
