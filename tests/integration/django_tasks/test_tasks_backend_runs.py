"""django.tasks tasks run by the real worker engine, in process: results, policies and signals.

The worker (tests/inprocess.py) claims, runs on its runner threads and
records exactly as ``runworker`` does; running it in the test's process lets
the test receive the django.tasks signals the worker sends. Django 6+ only
(tests/conftest.py leaves this module out on Django 5.2).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.tasks import TaskResultStatus, default_task_backend, task
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.test import override_settings

from django_jobretry.backends import JobRetryBackend
from django_jobretry.contrib.django_tasks.runs import TaskRun
from django_jobretry.exceptions import UnstorableResult
from django_jobretry.models import DeadLetter, Job
from django_jobretry.registry import registry
from tests.inprocess import run_until_settled
from tests.jobs_app import tasks
from tests.jobs_app.jobs import _record
from tests.jobs_app.models import Execution
from tests.processes import owner_pid

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("keep_signal_handlers")]

DECORATED = "tests.jobs_app.tasks.decorated_policy"
FLAKY = "tests.jobs_app.tasks.flaky"


def attempts_of(key: str) -> list[int]:
    return list(Execution.objects.filter(key=key).order_by("id").values_list("attempt", flat=True))


class TestRuns:
    def test_a_task_that_fails_twice_then_returns_is_successful(self) -> None:
        enqueued = tasks.flaky.enqueue("k", failures=2)
        run_until_settled()
        result = tasks.flaky.get_result(enqueued.id)
        assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, {"key": "k", "runs": 3})
        assert [e.exception_class_path for e in result.errors] == ["builtins.ConnectionResetError"] * 2
        # One worker id per attempt: each burst here is a worker of its own, in this process.
        assert [owner_pid(worker) for worker in result.worker_ids] == [os.getpid()] * 3
        assert attempts_of("k") == [1, 2, 3]

    def test_an_async_task_runs_to_completion_with_its_return_value(self) -> None:
        enqueued = tasks.asynchronous.enqueue("k")
        run_until_settled()
        result = tasks.asynchronous.get_result(enqueued.id)
        returned: object = result.return_value  # the coroutine's value, whatever its annotation says
        assert (result.status, returned, result.errors) == (TaskResultStatus.SUCCESSFUL, ["k", "async"], [])
        assert attempts_of("k") == [1]

    def test_a_task_taking_its_context_sees_its_attempt_number(self) -> None:
        enqueued = tasks.attempts.enqueue("k", 2)
        run_until_settled()
        result = tasks.attempts.get_result(enqueued.id)
        assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 3)
        assert attempts_of("k") == [1, 2, 3]

    def test_a_value_that_is_not_json_fails_the_task_fatally(self) -> None:
        enqueued = tasks.returns_a_set.enqueue("k")
        run_until_settled()
        result = tasks.returns_a_set.get_result(enqueued.id)
        assert result.status == TaskResultStatus.FAILED
        [error] = result.errors
        assert error.exception_class is UnstorableResult
        assert "not JSON" in error.traceback
        assert attempts_of("k") == [1], "fatal: never retried"
        dead = DeadLetter.objects.get()
        assert (dead.reason, dead.attempts) == ("fatal", 1)


@task
def nested(key: str, depth: int, container: str) -> Any:
    """Returns a value ``depth`` levels deep, each level a ``container``, or one shared twice."""
    _record(key)
    value: Any = "leaf"
    for _ in range(depth):
        shapes = {"list": [value], "dict": {"k": value}, "tuple": (value,), "shared": [value, value]}
        value = shapes[container]
    return value


class TestDeepResults:
    """A result too deep or too large to store fails once, as UnstorableResult (issue 17)."""

    def failed_once(self, key: str, depth: int, container: str) -> str:
        enqueued = nested.enqueue(key, depth, container)
        run_until_settled()
        result = nested.get_result(enqueued.id)
        assert result.status == TaskResultStatus.FAILED
        [error] = result.errors
        assert error.exception_class is UnstorableResult
        assert attempts_of(key) == [1], "fatal: never retried"
        dead = DeadLetter.objects.get()
        assert (dead.reason, dead.attempts) == ("fatal", 1)
        return error.traceback

    @pytest.mark.parametrize("container", ["list", "dict", "tuple"])
    def test_5000_levels_fail_once_naming_the_limit(self, container: str) -> None:
        # Before: Django's normalize_json raised RecursionError, retried as any error: 3 attempts.
        message = self.failed_once("deep", 5000, container)
        assert message.rstrip().endswith(
            f"UnstorableResult: the return value of task '{nested.module_path}' is nested deeper than 32 "
            "levels (MAX_ARGS_DEPTH)"
        )

    def test_deep_within_a_limit_of_1000_still_fails_once_at_the_recursion_limit(self, settings: Any) -> None:
        settings.JOBRETRY = {**settings.JOBRETRY, "MAX_ARGS_DEPTH": 1000}
        message = self.failed_once("deep", 999, "list")
        assert "is nested too deep for Django's JSON conversion (Python's recursion limit)" in message

    @pytest.mark.timeout(30)
    def test_a_value_sharing_its_parts_is_refused_without_converting_them_all(self) -> None:
        # 2**30 leaves, through Django's conversion, would be built one by one.
        assert "hold more than 65536 values" in self.failed_once("shared", 30, "shared")

    def test_the_deepest_allowed_result_is_stored(self) -> None:
        enqueued = nested.enqueue("ok", 31, "tuple")
        run_until_settled()
        value = nested.get_result(enqueued.id).return_value
        for _ in range(31):
            [value] = value
        assert value == "leaf"


class TestPolicyPrecedence:
    """OPTIONS["task_policies"] > @retry_policy > OPTIONS["policy"] (> "default")."""

    @staticmethod
    def stored_policies() -> dict[str, tuple[str, int]]:
        policies = {job.task_name: (job.policy_name, job.max_attempts) for job in Job.objects.all()}
        Job.objects.all().delete()
        return policies

    @staticmethod
    def tasks_setting(**options: Any) -> dict[str, Any]:
        backend = {"BACKEND": "django_jobretry.backends.JobRetryBackend", "QUEUES": ["default", "other"]}
        return {"default": {**backend, "OPTIONS": options} if options else backend}

    def enqueue_both(self) -> dict[str, tuple[str, int]]:
        tasks.flaky.enqueue("k", 0)
        tasks.decorated_policy.enqueue("k")
        return self.stored_policies()

    def test_each_level_and_override_settings(self) -> None:
        # tests/settings.py: OPTIONS policy "three"; the decorator says "default".
        assert self.enqueue_both() == {FLAKY: ("three", 3), DECORATED: ("default", 20)}
        with override_settings(TASKS=self.tasks_setting(policy="emails")):
            assert self.enqueue_both() == {FLAKY: ("emails", 8), DECORATED: ("default", 20)}
        mapping = {DECORATED: "three", FLAKY: "demo"}
        with override_settings(TASKS=self.tasks_setting(policy="emails", task_policies=mapping)):
            assert self.enqueue_both() == {FLAKY: ("demo", 3), DECORATED: ("three", 3)}
            run = registry.get(DECORATED)
            assert isinstance(run, TaskRun)
            assert run.policy == "three", "the registry (and testing.classify) see the mapped one"
        with override_settings(TASKS=self.tasks_setting()):
            assert self.enqueue_both() == {FLAKY: ("default", 20), DECORATED: ("default", 20)}
        # Leaving the override puts the test settings' backend back.
        assert self.enqueue_both() == {FLAKY: ("three", 3), DECORATED: ("default", 20)}

    def test_the_worker_retries_under_the_mapped_policy(self) -> None:
        with override_settings(TASKS=self.tasks_setting(policy="default", task_policies={FLAKY: "three"})):
            enqueued = tasks.flaky.enqueue("k", failures=5)
        run_until_settled()
        result = tasks.flaky.get_result(enqueued.id)
        assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 3)
        assert attempts_of("k") == [1, 2, 3]


class Received:
    """Every django.tasks signal, as (signal name, sender, status, attempts, status re-read by id)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, type, str, int, str]] = []

    def receiver(self, name: str) -> Any:
        def receive(sender: type, task_result: Any, **kwargs: Any) -> None:
            stored = default_task_backend.get_result(task_result.id).status
            with self.lock:
                self.events.append((name, sender, task_result.status, task_result.attempts, stored))

        return receive


@pytest.fixture
def received() -> Iterator[Received]:
    found = Received()
    handlers = [(s, found.receiver(n)) for s, n in ((task_enqueued, "enqueued"), (task_started, "started"))]
    handlers.append((task_finished, found.receiver("finished")))
    for signal, handler in handlers:
        signal.connect(handler, weak=False)
    yield found
    for signal, handler in handlers:
        signal.disconnect(handler)


class TestSignals:
    def test_a_retried_task_finishes_once(self, received: Received) -> None:
        tasks.flaky.enqueue("k", failures=2)
        run_until_settled()
        assert {sender for _, sender, *_ in received.events} == {JobRetryBackend}
        assert [(name, status, attempts) for name, _, status, attempts, _ in received.events] == [
            ("enqueued", TaskResultStatus.READY, 0),
            ("started", TaskResultStatus.RUNNING, 1),
            ("started", TaskResultStatus.RUNNING, 2),
            ("started", TaskResultStatus.RUNNING, 3),
            ("finished", TaskResultStatus.SUCCESSFUL, 3),
        ]
        # task_finished comes once the success is recorded: reading the result by id agrees.
        assert received.events[-1][-1] == TaskResultStatus.SUCCESSFUL

    def test_a_dead_letter_finishes_the_task_as_failed(self, received: Received) -> None:
        tasks.always_fails.enqueue("k")
        run_until_settled()
        names = [name for name, *_ in received.events]
        assert names == ["enqueued", "started", "started", "started", "finished"]
        assert received.events[-1][2:] == (TaskResultStatus.FAILED, 3, TaskResultStatus.FAILED)

    def test_plain_jobs_send_no_task_signals(self, received: Received) -> None:
        from tests.jobs_app import jobs

        jobs.flaky.enqueue("k", 1)
        run_until_settled()
        assert received.events == []

    def test_an_automatic_requeue_does_not_finish_the_task(self, received: Received) -> None:
        """A policy's requeue_budget revives the dead letter: the task finishes once, dead for good."""
        budget = {"max_attempts": 1, "base_delay": 0.01, "max_delay": 0.05, "jitter": 0, "requeue_budget": 1}
        jobretry = {**settings.JOBRETRY, "POLICIES": {**settings.JOBRETRY["POLICIES"], "budget": budget}}
        always_fails = "tests.jobs_app.tasks.always_fails"
        backend = TestPolicyPrecedence.tasks_setting(policy="three", task_policies={always_fails: "budget"})
        with override_settings(JOBRETRY=jobretry, TASKS=backend):
            enqueued = tasks.always_fails.enqueue("k")
            run_until_settled()
        result = tasks.always_fails.get_result(enqueued.id)
        assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 2)
        assert DeadLetter.objects.get().requeue_count == 1
        finished = [event[2:] for event in received.events if event[0] == "finished"]
        assert finished == [(TaskResultStatus.FAILED, 2, TaskResultStatus.FAILED)]


def test_runworker_knows_the_queue_a_django_tasks_task_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    """`runworker --queue other` is quiet when only an @task declares "other"; a typo gets a hint."""
    from django_jobretry.worker.lifecycle import warn_unknown_queues

    name = "tests.jobs_app.tasks.other_queue"
    definition = registry.get(name)
    assert definition is not None
    assert definition.queue_name == "other"
    monkeypatch.setattr(registry, "names", lambda: [name])
    assert warn_unknown_queues(["other"]) == []
    [warning] = warn_unknown_queues(["othr"])
    assert warning.endswith("Did you mean 'other'?")
