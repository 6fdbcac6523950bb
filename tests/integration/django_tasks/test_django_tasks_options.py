"""JobRetryBackend's per-task options: ``@task(policy=..., timeout=..., unique_*=..., limits)`` (issue 24).

A bad option is an ``InvalidTask`` at declaration naming the task, the option
and the value, and nothing is registered; the backend honours the options at
enqueue, the worker (in process, and one ``runworker --pool process``) at run
time. Tasks: tests/jobs_app/task_options.py. Django 6.1+ only (6.0's ``task()``
takes no such keyword, 5.2 has no django.tasks): skipped before the imports.
"""

from __future__ import annotations

import hashlib

import django
import pytest

if django.VERSION < (6, 1):
    pytest.skip("@task(...) passes JobRetryBackend's options on from Django 6.1", allow_module_level=True)

import pickle
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.checks import run_checks
from django.tasks import TaskResultStatus, task, task_backends
from django.tasks.exceptions import InvalidTask
from django.tasks.signals import task_enqueued
from django.test import override_settings

from django_jobretry.conf.uniqueness import NOT_UNIQUE, Uniqueness
from django_jobretry.contrib.django_tasks.runs import TaskRun
from django_jobretry.contrib.django_tasks.task_class import JobRetryTask
from django_jobretry.exceptions import JobConflict
from django_jobretry.limits import declare_task, task_limits
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.policy.limits import Limit, Rate
from django_jobretry.registry import registry, time_limit
from django_jobretry.testing import run_jobs
from tests.declarations import forgotten_afterwards
from tests.inprocess import run_until_settled
from tests.jobs_app import task_options, tasks
from tests.jobs_app.models import Execution
from tests.processes import Workers, finish, pids, spawn

MODULE = "tests.jobs_app.task_options"
NEVER = f"{MODULE}.never_declared"
PER_TENANT = f"{MODULE}.per_tenant"
OVER = f"{MODULE}.policy_over_decorator"
DECORATED = "tests.jobs_app.tasks.decorated_policy"
FLAKY = "tests.jobs_app.tasks.flaky"
LIMIT: dict[str, Any] = {"concurrency": 2, "concurrency_key": "t:{tenant}", "rate": "10/s", "burst": 3}
ALLOWED = (
    "JobRetryBackend's @task takes policy, timeout, unique_key, unique_args, unique_for, on_conflict, "
    "concurrency, concurrency_key, rate, burst, beside Django's priority, queue_name, backend, takes_context."
)


def runs_of(key: str) -> list[int]:
    """The attempt number of each run the task recorded."""
    return list(Execution.objects.filter(key=key).order_by("id").values_list("attempt", flat=True))


def tasks_setting(**options: Any) -> dict[str, Any]:
    """TASKS with the test backend's queues and these OPTIONS."""
    backend = {"BACKEND": "django_jobretry.backends.JobRetryBackend", "QUEUES": ["default", "other"]}
    return {"default": {**backend, "OPTIONS": options}}


class TestDeclaration:
    """Checked at ``@task``, before the backend registers anything."""

    @pytest.mark.parametrize(
        ("options", "message"),
        [
            ({"policy": "nope"}, "policy 'nope' is not a policy in JOBRETRY['POLICIES'], which defines ["),
            ({"policy": "thre"}, "Did you mean 'three'?"),
            ({"policy": 3}, "policy 3 is invalid: the name of a policy in JOBRETRY['POLICIES']"),
            ({"timeout": 0}, "timeout 0 is invalid"),
            ({"unique_key": ""}, "unique_key '' is invalid"),
            ({"unique_args": ("order",)}, "unique_args ['order'] names 'order', which never_declared()"),
            ({"unique_args": ("not a name",)}, "unique_args ('not a name',) is invalid"),
            ({"unique_for": "1h"}, "unique_for '1h' is invalid"),
            ({"on_conflict": "ignore"}, "on_conflict 'ignore' is invalid: one of 'return_existing', 'raise'"),
            ({"on_conflict": "raise"}, "unique_for and on_conflict apply to a keyed enqueue"),
            ({"concurrency": 0}, "concurrency=0 is invalid: an integer from 1 to 100,000"),
            ({"concurrency_key": "t:{key}"}, "concurrency_key='t:{key}' needs concurrency=N"),
            ({"concurrency": 1, "concurrency_key": "{tenant}"}, "concurrency_key '{tenant}' names 'tenant'"),
            ({"rate": "fast"}, "rate 'fast' is invalid: write it as 'N/s', 'N/m' or 'N/h'"),
            ({"burst": 5}, "burst=5 needs a rate"),
        ],
    )
    def test_a_bad_option_is_refused_naming_the_task_the_option_and_the_value(
        self, options: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(InvalidTask) as info:
            task(**options)(task_options.never_declared)
        assert str(info.value).startswith(f"@task {NEVER}: ")
        assert message in str(info.value)
        assert "JobRetryBackend's @task takes policy, timeout" in getattr(info.value, "hint", "")
        assert registry.get(NEVER) is None
        assert NEVER not in task_limits()

    def test_an_unknown_option_is_refused_naming_it_the_task_and_what_is_allowed(self) -> None:
        with pytest.raises(InvalidTask) as info:
            task(polcy="three")(task_options.never_declared)  # type: ignore[call-overload]
        assert str(info.value) == f"@task {NEVER}: unknown option 'polcy'. Did you mean 'policy'? {ALLOWED}"
        assert registry.get(NEVER) is None

    def test_options_are_stored_normalised_and_the_worker_reads_them(self) -> None:
        declared = task_options.slow_first_attempt
        run = registry.get(declared.module_path)
        assert isinstance(declared, JobRetryTask)
        assert isinstance(run, TaskRun)
        assert declared.timeout == run.timeout == timedelta(seconds=0.5)
        assert time_limit(declared.module_path, "three") == timedelta(seconds=0.5)
        report = task_options.nightly_report
        assert report.unique == Uniqueness(key="nightly-report", window=timedelta(hours=1))
        assert (report.unique_for, task_options.charge.unique_args) == (timedelta(hours=1), ("order_id",))

    def test_a_task_without_options_is_one_of_ours_that_deduplicates_nothing(self) -> None:
        assert type(tasks.flaky) is task_backends["default"].task_class is JobRetryTask
        assert (tasks.flaky.policy, tasks.flaky.unique, tasks.flaky.timeout) == (None, NOT_UNIQUE, None)
        assert time_limit(FLAKY, "three") is None, "no timeout of its own: its policy's (none)"

    def test_a_task_pickles_with_its_options(self) -> None:
        using = task_options.nightly_report.using(unique_key="x", priority=5, queue_name="other")
        for declared in (task_options.slow_first_attempt, task_options.charge_latest, using):
            copy = pickle.loads(pickle.dumps(declared))  # noqa: S301 - bytes this test made
            assert type(copy) is JobRetryTask
            assert (copy, copy.unique, copy.timeout) == (declared, declared.unique, declared.timeout)

    def test_using_takes_deduplication_per_call_and_keeps_djangos_own_options(self) -> None:
        at = datetime(2030, 1, 1, tzinfo=UTC)
        copy = task_options.charge.using(unique_key="batch-7", on_conflict="raise", priority=5, run_after=at)
        assert copy.unique == Uniqueness(key="batch-7", args=("order_id",), on_conflict="raise")
        assert (copy.priority, copy.run_after) == (5, at)
        assert task_options.charge.unique_key is None, "the task itself is unchanged"
        assert task_options.charge.using(queue_name="other").unique == task_options.charge.unique
        with pytest.raises(InvalidTask, match=rf"^@task {MODULE}.charge: unique_key '' is invalid"):
            task_options.charge.using(unique_key="")

    @pytest.mark.django_db
    def test_a_limit_declared_through_task_is_the_tasks_limit(self) -> None:
        try:
            with forgotten_afterwards():
                declared = task(**LIMIT)(task_options.per_tenant)
                assert task_limits()[PER_TENANT] == Limit(2, "t:{tenant}", Rate(10, 1.0, 3))
                result = declared.enqueue(7, "limited")
                assert Job.objects.get(pk=int(result.id)).limit_lane == "key:t:7"
        finally:
            declare_task(PER_TENANT, None)
        assert PER_TENANT not in task_limits()


class TestChecks:
    """``manage.py check``: a registered task's ``policy=`` that the settings no longer define."""

    @pytest.mark.parametrize("when_declared", ["defined then", "JOBRETRY invalid then"])
    def test_a_policy_the_settings_do_not_define_is_reported_once(self, when_declared: str) -> None:
        policies = settings.JOBRETRY["POLICIES"]
        jobretry = (
            {**settings.JOBRETRY, "POLICIES": {**policies, "fleeting": {}}}
            if when_declared == "defined then"
            else {"POLICIES": ["not", "a", "dict"]}  # the policy cannot be checked: left to the checks
        )
        with forgotten_afterwards():
            with override_settings(JOBRETRY=jobretry):
                task(policy="fleeting")(task_options.per_tenant)  # type: ignore[call-overload]
            overridden = tasks_setting(policy="three", task_policies={PER_TENANT: "three"})
            with override_settings(TASKS=overridden):
                found = self.policy_problems()
            # The task runs under the mapped "three": only E027 names its own policy.
            assert [message.id for message in found] == ["django_jobretry.E027"]
            assert found[0].msg == (
                f"@task {PER_TENANT}: policy 'fleeting' is not a policy in JOBRETRY['POLICIES'], "
                f"which defines {sorted(policies)}."
            )
            assert "JobRetryBackend's @task takes policy" in (found[0].hint or "")
            # Without the mapping it runs under "fleeting": E009, which names every task's policy, reports it.
            found = self.policy_problems()
            assert [message.id for message in found] == ["django_jobretry.E009"]
            assert f"task {PER_TENANT!r} uses the policy 'fleeting'" in found[0].msg
        assert self.policy_problems() == []

    @staticmethod
    def policy_problems() -> list[Any]:
        ids = ("django_jobretry.E009", "django_jobretry.E027")
        return [message for message in run_checks() if message.id in ids]


@pytest.mark.django_db
class TestPolicy:
    """OPTIONS["task_policies"] > @task(policy=...) > @retry_policy > OPTIONS["policy"]."""

    @staticmethod
    def enqueued_policies() -> dict[str, tuple[str, int]]:
        task_options.policy_over_decorator.enqueue("k")
        tasks.decorated_policy.enqueue("k")
        tasks.flaky.enqueue("k", 0)
        policies = {job.task_name: (job.policy_name, job.max_attempts) for job in Job.objects.all()}
        Job.objects.all().delete()
        return policies

    def test_each_level_in_order(self) -> None:
        with override_settings(TASKS=tasks_setting(policy="emails")):
            assert self.enqueued_policies() == {
                OVER: ("three", 3),  # @task(policy="three") over @retry_policy("default")
                DECORATED: ("default", 20),  # @retry_policy over OPTIONS["policy"]
                FLAKY: ("emails", 8),  # OPTIONS["policy"]
            }
            run = registry.get(OVER)
            assert isinstance(run, TaskRun)
            assert run.policy == "three"
        with override_settings(TASKS=tasks_setting(policy="emails", task_policies={OVER: "demo"})):
            assert self.enqueued_policies()[OVER] == ("demo", 3), "a deploy's mapping wins over the code"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("keep_signal_handlers")
class TestRuns:
    def test_a_task_declared_with_policy_three_dies_after_three_attempts(self) -> None:
        with override_settings(TASKS=tasks_setting(policy="default")):  # 20 attempts for the others
            enqueued = task_options.dies_under_three.enqueue("three")
        run_until_settled()
        result = task_options.dies_under_three.get_result(enqueued.id)
        assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 3)
        assert [e.exception_class_path for e in result.errors] == ["builtins.ConnectionResetError"] * 3
        assert runs_of("three") == [1, 2, 3]
        dead = DeadLetter.objects.get()
        assert (dead.reason, dead.policy_name, dead.attempts) == ("exhausted", "three", 3)

    def test_the_tasks_timeout_ends_an_attempt_that_runs_past_it(self) -> None:
        enqueued = task_options.slow_first_attempt.enqueue("slow", 1.5)
        run_until_settled(concurrency=1)
        result = task_options.slow_first_attempt.get_result(enqueued.id)
        assert (result.status, result.return_value, result.attempts) == (TaskResultStatus.SUCCESSFUL, 2, 2)
        [error] = result.errors
        assert error.exception_class_path == "django_jobretry.exceptions.JobTimeout"
        assert "ran longer than its timeout of 0:00:00.500000" in error.traceback
        assert runs_of("slow") == [1, 2]

    def test_under_the_process_pool_the_tasks_timeout_kills_the_attempt(self, workers: Workers) -> None:
        """A real `runworker --pool process`: the child running past the task's timeout is killed."""
        enqueued = task_options.slow_first_attempt.enqueue("pooled", 60)
        worker = spawn(workers, "--pool", "process", "--concurrency", "1", "--max-jobs", "2")
        code, output = finish(worker, timeout=90)
        assert code == 0, output
        enqueued.refresh()
        assert (enqueued.status, enqueued.return_value) == (TaskResultStatus.SUCCESSFUL, 2), output
        assert [e.exception_class_path for e in enqueued.errors] == ["django_jobretry.exceptions.JobTimeout"]
        first, second = pids("pooled")
        assert first != second, "the killed child's attempt; the second ran in a new child"
        assert worker.pid not in (first, second)


@pytest.mark.django_db
class TestDeduplication:
    """``unique_args``, ``unique_key``, ``unique_for`` and ``on_conflict`` through ``@task``."""

    def test_return_existing_gives_the_waiting_job_of_the_same_arguments(self) -> None:
        first = task_options.charge.enqueue(7, amount=1)
        again = task_options.charge.enqueue(order_id=7, amount=2)
        other = task_options.charge.enqueue(8)
        assert again.id == first.id != other.id
        row = Job.objects.get(pk=int(first.id))
        digest = hashlib.sha256(f'{MODULE}.charge\0{{"order_id":7}}'.encode()).hexdigest()
        assert row.unique_key == f"{MODULE}.charge:{digest}"
        assert (row.args, row.kwargs) == ([7], {"amount": 1}), "the first call's"
        assert Job.objects.count() == 2

    def test_task_enqueued_is_sent_for_the_new_job_only(self) -> None:
        sent: list[str] = []

        def enqueued(sender: Any, task_result: Any, **kwargs: Any) -> None:
            sent.append(task_result.id)

        task_enqueued.connect(enqueued, dispatch_uid="test-dedup-enqueued")
        try:
            first = task_options.charge.enqueue(7, amount=1)
            task_options.charge.enqueue(7, amount=2)  # the same order: nothing is enqueued
            other = task_options.charge.enqueue(8)
        finally:
            task_enqueued.disconnect(dispatch_uid="test-dedup-enqueued")
        assert sent == [first.id, other.id]

    def test_raise_refuses_the_second_enqueue_naming_the_job(self) -> None:
        first = task_options.charge_once.enqueue(7)
        with pytest.raises(JobConflict) as info:
            task_options.charge_once.enqueue(7, amount=2)
        assert (info.value.job_id, info.value.status) == (int(first.id), JobStatus.READY)
        assert Job.objects.count() == 1

    def test_replace_gives_the_waiting_job_the_new_arguments(self) -> None:
        first = task_options.charge_latest.enqueue(7, amount=1)
        latest = task_options.charge_latest.enqueue(7, amount=2)
        assert latest.id == first.id
        assert (latest.args, latest.kwargs) == ([7], {"amount": 2})
        assert Job.objects.get().kwargs == {"amount": 2}

    def test_unique_for_keeps_the_key_taken_after_the_job_succeeded(self) -> None:
        first = task_options.nightly_report.enqueue("monday")
        assert run_jobs().succeeded == 1
        again = task_options.nightly_report.enqueue("tuesday")
        assert (again.id, again.status) == (first.id, TaskResultStatus.SUCCESSFUL)
        assert Job.objects.get().unique_for == timedelta(hours=1)

    def test_a_using_key_deduplicates_across_arguments_and_is_part_of_the_result(self) -> None:
        batch = task_options.charge.using(unique_key="batch-1")
        first = batch.enqueue(7)
        again = batch.enqueue(8)
        assert again.id == first.id
        assert Job.objects.get().unique_key == "batch-1"
        fetched = task_options.charge.get_result(first.id)
        assert fetched == first, "a fetched result's task is the one enqueued, its .using() key included"
        own = task_options.charge.enqueue(9)
        assert task_options.charge.get_result(own.id).task == task_options.charge, "its own key: no .using()"
