"""A real `runworker --burst` runs a flow to its end, though its steps become ready only as others succeed.

The worker records its successes and claims its next jobs in one statement,
and that statement's success is what makes a waiting child ready: the
claim, which read the jobs before, cannot see the child. With one runner
every claim after the first rides on a success, so a burst worker that took
"claimed nothing" for "nothing left" stopped after the chain's first step.
"""

from __future__ import annotations

import subprocess

import pytest

from django_jobretry.flows import call, chain
from django_jobretry.models import Flow, FlowState, Job, JobStatus
from tests.jobs_app import flow_jobs
from tests.jobs_app.models import Execution
from tests.processes import finish, spawn_worker


@pytest.mark.django_db(transaction=True)
def test_a_burst_worker_runs_a_chain_and_its_callback_to_the_end(
    workers: list[subprocess.Popen[str]],
) -> None:
    flow = chain("burst", *(call(flow_jobs.step, key) for key in ("A", "B", "C")))
    flow.on_success(flow_jobs.step, "success")
    stored = flow.enqueue()
    workers.append(process := spawn_worker("--burst", "--concurrency", "1"))

    code, output = finish(process)

    assert code == 0, output
    assert list(Execution.objects.order_by("pk").values_list("key", flat=True)) == ["A", "B", "C", "success"]
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.SUCCEEDED}
    assert Flow.objects.get(pk=stored.pk).state == FlowState.COMPLETED
