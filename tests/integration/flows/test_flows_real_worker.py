"""The issue's acceptance at the suite's size, by a real `runworker` process: a chain in order, one callback.

"A batch of 10,000 steps: one callback, after the last; a chain of 1,000
steps runs in order." Here a chain of 100 and a batch of 1,000, each drained
by one `runworker --burst --concurrency 10` (bench/flows_scale.py runs the
full sizes). Order and counts are read from the database: the Execution
ledger each step writes while it runs (tests/jobs_app/flow_jobs.py), and the
job rows' ``started_at`` (its claim) and ``finished_at`` (its success), both
by the database clock. Ten runners could start a step early if a flow made
it ready before its parent succeeded; the burst worker exits by itself, with
a hard deadline.
"""

from __future__ import annotations

import itertools
import subprocess

import pytest
from django.db.models import Max

from django_jobretry.flows import batch, call, chain
from django_jobretry.models import Flow, FlowState, Job, JobStatus, StepRole
from tests.jobs_app import flow_jobs
from tests.jobs_app.models import Execution
from tests.processes import finish, spawn_worker

CHAIN = 100
BATCH = 1_000
#: Seconds the burst worker may take: about ten times what either drain takes on a loaded 2-core machine.
DEADLINE = 90

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(2 * DEADLINE + 30)]


def drain(workers: list[subprocess.Popen[str]]) -> None:
    workers.append(process := spawn_worker("--burst", "--concurrency", "10"))
    code, output = finish(process, timeout=DEADLINE)
    assert code == 0, output[-4000:]


def test_a_chain_runs_strictly_in_order_on_a_real_worker(workers: list[subprocess.Popen[str]]) -> None:
    stored = chain("long", *(call(flow_jobs.step, f"c{n}") for n in range(CHAIN))).enqueue()

    drain(workers)

    ledger = list(Execution.objects.order_by("pk").values_list("key", flat=True))
    assert ledger == [f"c{n}" for n in range(CHAIN)]
    jobs = list(Job.objects.filter(flow_step__flow=stored).order_by("flow_step_id"))
    assert [job.args[0] for job in jobs] == [f"c{n}" for n in range(CHAIN)]
    assert {(job.status, job.attempts) for job in jobs} == {(JobStatus.SUCCEEDED, 1)}
    early = [
        (child.args[0], parent.args[0])
        for parent, child in itertools.pairwise(jobs)
        if child.started_at < parent.finished_at
    ]
    assert early == [], "steps claimed before the step before them succeeded"
    stored.refresh_from_db()
    assert (stored.state, stored.open_steps) == (FlowState.COMPLETED, 0)


def test_a_batchs_callback_runs_once_after_every_step_on_a_real_worker(
    workers: list[subprocess.Popen[str]],
) -> None:
    stored = batch(
        "wide",
        (call(flow_jobs.step, f"b{n}") for n in range(BATCH)),
        on_success=call(flow_jobs.step, "success"),
    ).enqueue()

    drain(workers)

    assert Execution.objects.filter(key="success").count() == 1
    assert Execution.objects.exclude(key="success").count() == BATCH
    last_step_run = Execution.objects.exclude(key="success").aggregate(last=Max("pk"))["last"]
    assert Execution.objects.get(key="success").pk > last_step_run
    steps = Job.objects.filter(flow_step__flow=stored, flow_step__role=StepRole.STEP)
    assert steps.count() == BATCH
    assert set(steps.values_list("status", "attempts")) == {(JobStatus.SUCCEEDED, 1)}
    callback = Job.objects.get(flow_step__flow=stored, flow_step__role=StepRole.ON_SUCCESS)
    assert (callback.status, callback.attempts) == (JobStatus.SUCCEEDED, 1)
    assert callback.started_at >= steps.aggregate(last=Max("finished_at"))["last"]
    assert Flow.objects.get(pk=stored.pk).state == FlowState.COMPLETED
