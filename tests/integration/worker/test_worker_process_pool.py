"""`runworker --pool process`: a time limit kills the handler's process; a crash costs one attempt;
children are recycled after a number of jobs or past a memory limit.

Real worker processes against real PostgreSQL, with hard deadlines; each
handler records the pid it ran in (tests/jobs_app), which shows where it ran.
"""

from __future__ import annotations

import pytest

from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.worker.runner import STALE_ARGUMENTS_RULE
from tests.jobs_app import jobs
from tests.processes import Workers, finish, pids, spawn

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_job_past_its_timeout_is_killed_and_retried_until_it_dies(workers: Workers) -> None:
    slow = jobs.sleepy_limited.enqueue("slow", 60)  # timeout=1, 3 attempts
    jobs.record.enqueue("quick")
    worker = spawn(workers, "--pool", "process", "--concurrency", "2", "--max-jobs", "4")
    code, output = finish(worker, timeout=90)
    assert code == 0, output
    dead = DeadLetter.objects.get(job_id=slow.pk)
    assert (dead.reason, dead.attempts) == ("exhausted", 3)
    assert [(e["ended"], e["error_class"]) for e in dead.errors] == [
        ("timeout", "django_jobretry.exceptions.JobTimeout")
    ] * 3
    assert "its process was killed" in dead.last_error
    # Each attempt ran in a fresh process: the one before was killed.
    assert len(set(pids("slow"))) == 3
    assert worker.pid not in pids("slow")
    assert Job.objects.get(task_name=jobs.record.name).status == JobStatus.SUCCEEDED
    assert pids("quick") != [worker.pid]


def test_a_job_that_ends_its_process_costs_an_attempt_not_the_worker(workers: Workers) -> None:
    poison = jobs.exits_process.enqueue("poison")
    jobs.record.enqueue("quick")
    worker = spawn(workers, "--pool", "process", "--concurrency", "1", "--max-jobs", "4")
    code, output = finish(worker, timeout=90)
    assert code == 0, output
    dead = DeadLetter.objects.get(job_id=poison.pk)
    assert (dead.reason, dead.attempts) == ("exhausted", 3)
    assert [e["ended"] for e in dead.errors] == ["worker_exit"] * 3
    assert "exited with code 3" in dead.last_error
    assert dead.last_error_class == "django_jobretry.exceptions.ChildFailed"  # a JobRetryError
    assert Job.objects.get(task_name=jobs.record.name).status == JobStatus.SUCCEEDED


def test_stored_arguments_that_no_longer_bind_are_fatal_in_a_child_with_the_rule(workers: Workers) -> None:
    stale = jobs.record.enqueue("stale")
    Job.objects.filter(pk=stale.pk).update(args=["stale", "since removed"])
    worker = spawn(workers, "--pool", "process", "--concurrency", "1", "--max-jobs", "1")
    code, output = finish(worker, timeout=90)
    assert code == 0, output
    dead = DeadLetter.objects.get(job_id=stale.pk)
    assert (dead.reason, dead.attempts, pids("stale")) == ("fatal", 1, [])
    assert (dead.errors[0]["ended"], dead.errors[0]["rule"]) == ("fatal", STALE_ARGUMENTS_RULE)
    assert dead.last_error_class == "django_jobretry.exceptions.StaleArguments"


def test_children_are_replaced_after_max_jobs_per_child(workers: Workers) -> None:
    for index in range(3):
        jobs.record.enqueue(f"recycled-{index}")
    args = ("--pool", "process", "--concurrency", "1", "--max-jobs-per-child", "1", "--max-jobs", "3")
    worker = spawn(workers, *args)
    code, output = finish(worker, timeout=90)
    assert code == 0, output
    ran_in = [pid for index in range(3) for pid in pids(f"recycled-{index}")]
    assert len(set(ran_in)) == 3
    assert worker.pid not in ran_in
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == 3


@pytest.mark.parametrize(("max_memory_mb", "children"), [("1", 3), ("100000", 1)])
def test_a_child_past_max_memory_mb_is_replaced_after_its_job(
    workers: Workers, max_memory_mb: str, children: int
) -> None:
    # Any child with Django set up peaks well above 1 MB; none reaches 100 000 MB.
    for index in range(3):
        jobs.record.enqueue(f"memory-{index}")
    args = ("--pool", "process", "--concurrency", "1", "--max-memory-mb", max_memory_mb, "--max-jobs", "3")
    code, output = finish(spawn(workers, *args), timeout=120)
    assert code == 0, output
    ran_in = [pid for index in range(3) for pid in pids(f"memory-{index}")]
    assert len(ran_in) == 3
    assert len(set(ran_in)) == children
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == 3
    assert not DeadLetter.objects.exists()


@pytest.mark.parametrize("option", [("--max-jobs-per-child", "5"), ("--max-memory-mb", "512")])
def test_recycling_options_need_the_process_pool(workers: Workers, option: tuple[str, str]) -> None:
    jobs.record.enqueue("untouched")
    code, output = finish(spawn(workers, *option, "--burst"), timeout=30)
    assert code != 0
    assert f"{option[0]} recycles child processes: it needs --pool process" in output
    assert Job.objects.get().attempts == 0
