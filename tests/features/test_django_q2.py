"""Step definitions for django_q2.feature: a real qcluster (ORM broker) on the test database."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.test import Client
from django.urls import reverse
from django_q.models import OrmQ, Task
from django_q.tasks import async_task
from pytest_bdd import given, scenarios, then, when

from django_jobretry.models import DeadLetter, DeadLetterSource, Job
from tests.jobs_app.models import Execution
from tests.processes import wait_until
from tests.q2_asserts import retried_with_growing_delays, runs
from tests.q2_cluster import Cluster, cluster

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["cluster"]  # the fixture, imported for pytest

scenarios("django_q2.feature")

TASKS = "tests.jobs_app.q2_tasks"
#: Seconds each wait on the cluster may take before the scenario fails instead of hanging.
DEADLINE = 45.0


@dataclass
class Submitted:
    task_id: str = ""
    key: str = ""


@pytest.fixture
def submitted() -> Submitted:
    return Submitted()


def succeeded(task_id: str) -> None:
    wait_until(
        lambda: Task.objects.filter(id=task_id, success=True).exists() and not OrmQ.objects.exists(),
        timeout=DEADLINE,
        what=f"django-q2 task {task_id} to succeed and leave the queue",
    )


@given("a django-q2 cluster running with the adapter")
def running(cluster: Cluster) -> Cluster:
    return cluster


@when("a task that fails twice before succeeding is submitted with async_task")
def fails_twice(submitted: Submitted) -> None:
    submitted.key = "twice"
    submitted.task_id = async_task(f"{TASKS}.fail_then_succeed", submitted.key, 2)


@then("the cluster runs it 3 times, each retry later than the one before, and it succeeds")
def retried(submitted: Submitted) -> None:
    succeeded(submitted.task_id)
    retried_with_growing_delays(submitted.task_id, submitted.key)


@then("no dead letter is left")
def no_dead_letter() -> None:
    assert not DeadLetter.objects.exists()
    assert not Job.objects.exists()  # django-q2's tasks never become our jobs


@when("a task that always fails until it is fixed is submitted with async_task")
def always_fails(submitted: Submitted) -> None:
    submitted.key = "broken"
    submitted.task_id = async_task(f"{TASKS}.fail_until_fixed", submitted.key)


@then("it becomes one dead letter from django-q2 after 3 attempts")
def one_dead_letter(submitted: Submitted) -> None:
    wait_until(
        lambda: DeadLetter.objects.filter(external_id=submitted.task_id).exists(),
        timeout=DEADLINE,
        what="the dead letter",
    )
    dead = DeadLetter.objects.get()
    assert (dead.source, dead.reason, dead.attempts) == (DeadLetterSource.DJANGO_Q2, "exhausted", 3)
    assert [entry["attempt"] for entry in dead.errors] == [1, 2, 3]


@then("the cluster does not run it again")
def not_again(submitted: Submitted) -> None:
    assert not OrmQ.objects.exists()  # nothing left for django-q2 to deliver
    # The cluster is still taking tasks: one more runs, and the dead one does not with it.
    marker = async_task(f"{TASKS}.succeed", "marker")
    succeeded(marker)
    assert len(runs(submitted.key)) == 3


@then("the admin shows the dead letter with its 3 attempts")
def admin_shows(admin_client: Client) -> None:
    dead = DeadLetter.objects.get()
    page = admin_client.get(reverse("admin:django_jobretry_deadletter_change", args=[dead.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert dead.external_id in html
    assert html.count("builtins.ConnectionError") >= 3  # one per attempt in the history


@then("django-q2's own Resubmit on its failure refuses it, naming the dead letter")
def q2_resubmit_refused(admin_client: Client, submitted: Submitted) -> None:
    dead = DeadLetter.objects.get()
    data = {"action": "resubmit_unowned", "_selected_action": [submitted.task_id], "index": "0"}
    response = admin_client.post(reverse("admin:django_q_failure_changelist"), data, follow=True)
    [message] = [str(m) for m in response.context["messages"]]
    assert f"{submitted.task_id} (dead letter {dead.pk}: requeue it there)" in message
    assert not OrmQ.objects.exists()  # nothing sent to django-q2 a second time
    assert Task.objects.filter(id=submitted.task_id, success=False).exists()  # its failure is kept


@when("the fix is deployed and an operator requeues the dead letter in the admin")
def requeue_in_admin(admin_client: Client, submitted: Submitted) -> None:
    Execution.objects.create(key=f"{submitted.key}:fixed", attempt=0, pid=0)
    dead = DeadLetter.objects.get()
    url = reverse("admin:django_jobretry_deadletter_requeue", args=[dead.pk])
    response = admin_client.post(url, follow=True)
    assert response.status_code == 200
    assert not DeadLetter.objects.exists()
    # The cluster may take the new task at once: it is found by its function, not in the queue.


@then("the cluster runs the task again and it succeeds")
def runs_again(submitted: Submitted) -> None:
    done = Task.objects.filter(func=f"{TASKS}.fail_until_fixed", success=True)
    wait_until(
        lambda: done.exists() and not OrmQ.objects.exists(),
        timeout=DEADLINE,
        what="the requeued task to succeed and leave the queue",
    )
    assert done.get().id != submitted.task_id  # a new django-q2 task, not the dead one
    assert len(runs(submitted.key)) == 4
