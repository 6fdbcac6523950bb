"""Step definitions for task_options.feature: ``@task(...)`` options on a real `runworker` (Django 6.1+).

The caller declares and enqueues through django.tasks only; the worker is a
`manage.py runworker` process, which registers the tasks of
tests/jobs_app/task_options.py at start-up (tests/settings.py). Runs are
counted from the Execution rows the task writes first. Every wait has a hard
deadline. Django 6.0's ``task()`` takes no such option (and 5.2 has no
django.tasks), so the module is skipped there before its imports.
"""

from __future__ import annotations

import django
import pytest

if django.VERSION < (6, 1):
    pytest.skip("@task(...) passes JobRetryBackend's options on from Django 6.1", allow_module_level=True)

import signal
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

from django.tasks import TaskResultStatus, default_task_backend, task
from django.tasks.base import TaskResult
from django.tasks.exceptions import InvalidTask
from django.test import override_settings
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry import deadletters
from django_jobretry.conf import jobretry_settings
from django_jobretry.registry import registry
from tests.jobs_app import task_options
from tests.jobs_app.models import Execution
from tests.processes import Workers, finish, spawn, wait_until

# A subprocess worker must see the rows the test writes: no wrapping transaction.
pytestmark = pytest.mark.django_db(transaction=True)

scenarios("task_options.feature")

#: The function the refused declarations are given: never registered.
NEVER = "tests.jobs_app.task_options.never_declared"


@dataclass
class Story:
    """What one scenario declared or enqueued."""

    key: str = "task-options"
    result_id: str = ""
    refused: InvalidTask | None = None

    def result(self) -> TaskResult[..., None]:
        result: TaskResult[..., None] = task_options.dies_under_three.get_result(self.result_id)
        return result


@pytest.fixture
def story() -> Story:
    return Story()


@pytest.fixture
def overrides() -> Iterator[ExitStack]:
    """Settings a step overrides in this process, for the rest of the scenario."""
    with ExitStack() as stack:
        yield stack


# -- Given ---------------------------------------------------------------------------


@given(parsers.parse('the tasks backend\'s own policy is "{name}", of {count:d} attempts'))
def backend_policy(overrides: ExitStack, name: str, count: int) -> None:
    backend = {"BACKEND": "django_jobretry.backends.JobRetryBackend", "QUEUES": ["default", "other"]}
    overrides.enter_context(override_settings(TASKS={"default": {**backend, "OPTIONS": {"policy": name}}}))
    assert default_task_backend.options["policy"] == name
    assert jobretry_settings.policy(name).max_attempts == count


@given('a task declared with @task(policy="three") that always fails is enqueued')
def enqueue_dies_under_three(story: Story) -> None:
    assert task_options.dies_under_three.policy == "three"
    story.result_id = task_options.dies_under_three.enqueue(story.key).id


# -- When ----------------------------------------------------------------------------


@when("a worker runs until the task is finished")
def worker_until_finished(story: Story, workers: Workers) -> None:
    """A long-running worker, stopped with SIGTERM once the result says the task finished."""
    process = spawn(workers)

    def finished() -> bool:
        assert process.poll() is None, "the worker exited before the task finished"
        return story.result().is_finished

    wait_until(finished, timeout=60, what="the task to finish")
    process.send_signal(signal.SIGTERM)
    code, output = finish(process, timeout=30)
    assert code == 0, output


@when(parsers.parse('a task is declared with @task({option}="{value}")'))
def declare_with(story: Story, option: str, value: str) -> None:
    with pytest.raises(InvalidTask) as info:
        task(**{option: value})(task_options.never_declared)  # type: ignore[call-overload]
    story.refused = info.value


# -- Then ----------------------------------------------------------------------------


@then(parsers.parse("the task ran {count:d} times"))
def ran_times(story: Story, count: int) -> None:
    assert Execution.objects.filter(key=story.key).count() == count


@then(parsers.parse("its result is {status} after {count:d} attempts"))
def result_is(story: Story, status: str, count: int) -> None:
    result = story.result()
    assert (result.status, result.attempts, len(result.worker_ids)) == (
        TaskResultStatus(status),
        count,
        count,
    )
    assert [error.exception_class_path for error in result.errors] == [
        "builtins.ConnectionResetError"
    ] * count


@then(parsers.parse('the operator finds its dead letter, exhausted under the policy "{policy}"'))
def found_dead(story: Story, policy: str) -> None:
    listed = deadletters.list_dead(task_name=task_options.dies_under_three.module_path).items
    [dead] = [item for item in listed if item.args == [story.key]]
    assert (dead.job_id, dead.reason, dead.policy_name) == (int(story.result_id), "exhausted", policy)


@then(parsers.parse('the declaration is refused naming "{option}", the task and the options it takes'))
def refused_naming(story: Story, option: str) -> None:
    message = str(story.refused)
    assert message.startswith(f"@task {NEVER}: unknown option {option!r}.")
    assert "JobRetryBackend's @task takes policy, timeout, unique_key, unique_args" in message


@then("no task is registered under the function's name")
def nothing_registered() -> None:
    assert registry.get(NEVER) is None
