"""A real `manage.py runworker --burst` process runs a mix of jobs to their final states."""

from __future__ import annotations

import subprocess

import pytest

from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution
from tests.processes import finish, spawn_worker


def runs(key: str) -> int:
    return Execution.objects.filter(key=key).count()


@pytest.mark.django_db(transaction=True)
def test_burst_worker_process_runs_the_mix(workers: list[subprocess.Popen[str]]) -> None:
    jobs.record.enqueue("ok")
    fatal = jobs.fatal.enqueue("fatal")
    # Retries are due 10-50 ms later; --burst exits only when nothing is due, so
    # run bursts until no live job is left (bounded).
    for _ in range(20):
        workers.append(process := spawn_worker("--burst"))
        code, output = finish(process)
        assert code == 0, output
        if not Job.objects.filter(status__in=[JobStatus.READY, JobStatus.RUNNING]).exists():
            break
    assert runs("ok") == 1
    assert runs("fatal") == 1
    assert Job.objects.get(task_name=jobs.record.name).status == JobStatus.SUCCEEDED
    dead = DeadLetter.objects.get(job_id=fatal.pk)
    assert (dead.reason, dead.attempts) == ("fatal", 1)
