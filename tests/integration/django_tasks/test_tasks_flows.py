"""django.tasks tasks as a flow's steps: run and completed, results passed on, another backend's refused.

A flow's step may be a django.tasks ``Task`` of JobRetryBackend: flows/build.py
takes it as the backend's enqueue does (``job_spec``), so its policy, queue
and priority hold inside the flow, and the task framework reads its result.
A task of another backend would never be run by our workers: the flow is
refused, naming the step, and nothing is stored. Django 6+ only
(tests/conftest.py leaves this module out on Django 5.2).
"""

from __future__ import annotations

import pytest
from django.tasks import TaskResultStatus
from django.test import override_settings

from django_jobretry.exceptions import InvalidFlow
from django_jobretry.flows import Workflow
from django_jobretry.models import Flow, FlowState, FlowStep, Job, JobStatus, StepState
from django_jobretry.testing import run_jobs
from tests.inprocess import run_until_settled
from tests.jobs_app import flow_jobs, tasks
from tests.jobs_app.models import Execution

OURS = {"BACKEND": "django_jobretry.backends.JobRetryBackend", "QUEUES": ["default", "other"]}
IMMEDIATE = {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend", "QUEUES": []}


def ledger() -> list[tuple[str, int]]:
    return list(Execution.objects.order_by("pk").values_list("key", "attempt"))


def job_of(flow: Flow, name: str) -> Job:
    return Job.objects.get(flow_step__flow=flow, flow_step__name=name)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("keep_signal_handlers")
def test_a_flow_of_django_tasks_runs_to_completion_by_the_worker_engine() -> None:
    flow = Workflow("tasks")
    first = flow.add(tasks.flaky, "first", 1, name="first")  # fails once, retried by its policy
    flow.add(tasks.other_queue, "second", after=[first], name="second")
    flow.on_success(tasks.flaky, "success", 0)
    stored = flow.enqueue()

    run_until_settled()

    assert ledger() == [("first", 1), ("first", 2), ("second", 1), ("success", 1)]
    stored.refresh_from_db()
    assert (stored.state, stored.open_steps) == (FlowState.COMPLETED, 0)
    assert set(FlowStep.objects.filter(flow=stored).values_list("state", flat=True)) == {StepState.SUCCEEDED}
    second = job_of(stored, "second")
    # The task's own options hold inside the flow: its queue and priority, its module path as the name.
    assert (second.task_name, second.queue_name, second.priority) == (
        "tests.jobs_app.tasks.other_queue",
        "other",
        5,
    )
    # The task framework reads a step's result as any of its tasks' results.
    result = tasks.flaky.get_result(str(job_of(stored, "first").pk))
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, {"key": "first", "runs": 2})
    assert [error.exception_class_path for error in result.errors] == ["builtins.ConnectionResetError"]


@pytest.mark.django_db
@override_settings(TASKS={"default": OURS, "immediate": IMMEDIATE})
def test_a_task_of_another_backend_is_refused_by_its_step_name_and_nothing_is_stored() -> None:
    flow = Workflow("mixed")
    ours = flow.add(tasks.flaky, "ours", 0, name="ours")
    flow.add(tasks.flaky.using(backend="immediate"), "theirs", 0, after=[ours], name="theirs")

    with pytest.raises(InvalidFlow) as refused:
        flow.enqueue()

    assert str(refused.value).startswith("step 'theirs' of flow 'mixed': ")
    assert "neither an @job task nor a django.tasks task of django_jobretry's backend" in str(refused.value)
    assert (Flow.objects.count(), FlowStep.objects.count(), Job.objects.count()) == (0, 0, 0)
    assert Execution.objects.count() == 0  # the immediate backend ran nothing either


@pytest.mark.django_db
def test_a_django_tasks_steps_return_value_is_read_by_its_child_through_parent_results() -> None:
    flow = Workflow("results")
    task_parent = flow.add(tasks.flaky, "t", 0, name="task-parent")
    job_parent = flow.add(flow_jobs.step, "j", name="job-parent")
    flow.add(tasks.gathers, "child", after=[task_parent, job_parent], results=True, name="child")
    stored = flow.enqueue()

    run_jobs(include_scheduled=True)

    child = job_of(stored, "child")
    expected = {"task-parent": {"key": "t", "runs": 1}, "job-parent": "j"}
    assert (child.status, child.return_value) == (JobStatus.SUCCEEDED, expected)
    result = tasks.gathers.get_result(str(child.pk))
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, expected)
    assert [key for key, _ in ledger()][-1] == "child"
    assert Flow.objects.get(pk=stored.pk).state == FlowState.COMPLETED
