"""Step definitions for django_tasks.feature: Django's task API on real `runworker` processes.

The caller's side uses only django.tasks: ``@task`` functions of
tests/jobs_app/tasks.py, ``.enqueue()`` and ``get_result()``. The operator's
side uses the public dead-letter service, as the admin does. Runs are
counted from the Execution rows the tasks write first, so a run counts
whichever process made it, even one killed afterwards. Every wait polls
with a hard deadline. Django 6+ only (tests/conftest.py).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.tasks import TaskResultStatus, default_task_backend
from django.tasks.base import Task, TaskResult
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry import deadletters
from django_jobretry.conf import jobretry_settings
from django_jobretry.models import DeadLetter
from tests.features.test_retry import FINAL_TIMEOUT, output_of
from tests.jobs_app import tasks
from tests.jobs_app.models import Execution
from tests.processes import Workers, finish, owner_pid, spawn, wait_until, wait_while_progressing

# A subprocess worker must see the rows the test writes: no wrapping transaction.
pytestmark = pytest.mark.django_db(transaction=True)

scenarios("django_tasks.feature")


@dataclass
class Caller:
    """The code that enqueued one task and polls its result by id."""

    key: str = "task"
    task: Task[..., Any] | None = None
    result_id: str = ""
    #: Every status a poll saw, in order, without repeats.
    statuses: list[str] = field(default_factory=list)
    flag: Path | None = None
    processes: list[subprocess.Popen[str]] = field(default_factory=list)
    killed_pid: int | None = None

    def enqueue(self, task: Task[..., Any], *args: Any) -> None:
        self.task = task
        self.result_id = task.enqueue(self.key, *args).id

    def result(self) -> TaskResult[..., Any]:
        assert self.task is not None
        result = self.task.get_result(self.result_id)
        assert result.id == self.result_id
        if not self.statuses or self.statuses[-1] != result.status:
            self.statuses.append(result.status)
        return result

    def is_finished(self) -> bool:
        return self.result().is_finished

    def start(self, workers: Workers, *args: str) -> subprocess.Popen[str]:
        self.processes.append(process := spawn(workers, *args))
        return process

    def runs(self) -> list[Execution]:
        return list(Execution.objects.filter(key=self.key).order_by("created_at", "pk"))


@pytest.fixture
def caller() -> Caller:
    return Caller()


# -- Given ---------------------------------------------------------------------------


@given(parsers.parse('the tasks backend runs its tasks under the policy "{name}" of {count:d} attempts'))
def backend_policy(name: str, count: int) -> None:
    assert default_task_backend.options["policy"] == name
    assert jobretry_settings.policy(name).max_attempts == count


@given(parsers.parse("a task that fails retryably {failures:d} times and then succeeds is enqueued"))
def flaky_task(caller: Caller, failures: int) -> None:
    caller.enqueue(tasks.flaky, failures)


@given("a task that always fails retryably is enqueued")
def always_failing_task(caller: Caller) -> None:
    caller.enqueue(tasks.always_fails)


@given("a task that fails fatally is enqueued")
def fatal_task(caller: Caller) -> None:
    caller.enqueue(tasks.fatal)


@given(parsers.parse("a task that fails until its cause is fixed has died after {count:d} attempts"))
def died_until_fixed(caller: Caller, workers: Workers, tmp_path: Path, count: int) -> None:
    caller.flag = tmp_path / "fixed"
    caller.enqueue(tasks.succeeds_when, str(caller.flag))
    burst_until_finished(caller, workers, 1)
    result = caller.result()
    assert (result.status, result.attempts) == (TaskResultStatus.FAILED, count)
    caller.statuses = [result.status]  # what the caller polls from now on


@given(parsers.parse("a worker with a {seconds:d} second lease is running"))
def worker_with_lease(caller: Caller, workers: Workers, seconds: int) -> None:
    caller.start(workers, "--lease", str(seconds))


@given(parsers.parse("a task that takes its context and runs {seconds:d} seconds the first time is enqueued"))
def slow_context_task(caller: Caller, seconds: int) -> None:
    caller.enqueue(tasks.slow_first_attempt, seconds)


# -- When ----------------------------------------------------------------------------


def poll_until_finished(caller: Caller, between_polls: Callable[[], None]) -> None:
    """Poll the result by id until it is finished, calling ``between_polls`` meanwhile.

    The hard deadline is on progress: it fails once no new run has started for
    FINAL_TIMEOUT seconds, so a task of three attempts on three burst workers
    is not failed for the workers' boot time on a loaded machine.
    """
    runs, what = lambda: len(caller.runs()), f"task {caller.result_id} to finish"
    try:
        wait_while_progressing(caller.is_finished, runs, between_polls, stall=FINAL_TIMEOUT, what=what)
    except pytest.fail.Exception as stalled:
        pytest.fail(f"{stalled}; workers:\n{output_of(caller.processes)}")


@when(parsers.re(r"(?:a|another) worker runs until the task is finished"))
def worker_until_finished(caller: Caller, workers: Workers) -> None:
    """A long-running worker, stopped with SIGTERM once the result says the task finished."""
    process = caller.start(workers)

    def still_running() -> None:
        assert process.poll() is None, f"the worker exited early:\n{output_of([process])}"
        time.sleep(0.02)

    poll_until_finished(caller, still_running)
    process.send_signal(signal.SIGTERM)
    code, output = finish(process, timeout=30)
    assert code == 0, output


@when(parsers.parse("{count:d} burst workers poll side by side until the task is finished"))
def burst_until_finished(caller: Caller, workers: Workers, count: int) -> None:
    def one_round() -> None:
        for process in [caller.start(workers, "--burst") for _ in range(count)]:
            code, output = finish(process, timeout=30)
            assert code == 0, output

    poll_until_finished(caller, one_round)


@when(parsers.parse("workers poll for due jobs {times:d} more times"))
def extra_polling(caller: Caller, workers: Workers, times: int) -> None:
    for _ in range(times):
        code, output = finish(caller.start(workers, "--burst"), timeout=30)
        assert code == 0, output


@when("the cause is fixed")
def fix_the_cause(caller: Caller) -> None:
    assert caller.flag is not None
    caller.flag.touch()


@when("the operator requeues its dead letter")
def operator_requeues(caller: Caller) -> None:
    dead = operators_dead_letter(caller)
    deadletters.requeue(dead.pk, actor="operator")


@when("the worker is killed while the task runs")
def kill_worker_mid_task(caller: Caller) -> None:
    process = caller.processes[-1]
    wait_until(lambda: bool(caller.runs()), what="the task to start")
    running = caller.result()
    assert (running.status, running.attempts) == (TaskResultStatus.RUNNING, 1), "must be mid-run when killed"
    process.kill()  # SIGKILL: no handler, no cleanup, like a power loss
    process.communicate(timeout=10)
    assert process.returncode == -signal.SIGKILL
    caller.killed_pid = process.pid
    # Nothing released it: the result still shows the dead worker running it, until the lease expires.
    still = caller.result()
    assert (still.status, still.attempts) == (TaskResultStatus.RUNNING, 1)
    assert owner_pid(still.worker_ids[0]) == process.pid


# -- Then ----------------------------------------------------------------------------


def operators_dead_letter(caller: Caller) -> DeadLetter:
    """The dead letter of the task, as the operator's list shows it (newest dead first)."""
    assert caller.task is not None
    listed = deadletters.list_dead(task_name=caller.task.module_path).items
    [dead] = [item for item in listed if item.args[:1] == [caller.key]]
    return dead


@then(parsers.re(r"the task ran (?P<count>\d+) times?"), converters={"count": int})
def ran_times(caller: Caller, count: int) -> None:
    assert len(caller.runs()) == count, [str(run) for run in caller.runs()]


@then(parsers.parse("the task ran {count:d} times, in {processes:d} different worker processes"))
def ran_in_processes(caller: Caller, count: int, processes: int) -> None:
    runs = caller.runs()
    # The task recorded the attempt number its context gave it: the lost attempt counts.
    assert [run.attempt for run in runs] == list(range(1, count + 1))
    assert len({run.pid for run in runs}) == processes
    assert runs[0].pid == caller.killed_pid
    assert runs[-1].pid == caller.processes[-1].pid


@then(
    parsers.re(r"its result is (?P<status>[A-Z]+) after (?P<count>\d+) attempts?"),
    converters={"count": int},
)
def result_is(caller: Caller, status: str, count: int) -> None:
    result = caller.result()
    assert (result.status, result.attempts, len(result.worker_ids)) == (status, count, count)
    assert result.enqueued_at is not None
    assert (result.finished_at is not None) == result.is_finished
    assert all(worker for worker in result.worker_ids), result.worker_ids


@then(
    parsers.re(r'its result has (?P<count>\d+) errors? of class "(?P<path>[\w.]+)"'),
    converters={"count": int},
)
def result_errors(caller: Caller, count: int, path: str) -> None:
    errors = caller.result().errors
    assert [error.exception_class_path for error in errors] == [path] * count
    assert all(issubclass(error.exception_class, BaseException) for error in errors)
    assert all(error.traceback for error in errors)


@then("its return value is what the task returned on its third run")
def third_run_value(caller: Caller) -> None:
    assert caller.result().return_value == {"key": caller.key, "runs": 3}


@then("its return value is 2, the attempt its context gave it")
def context_attempt_value(caller: Caller) -> None:
    assert caller.result().return_value == 2


@then(parsers.parse('the operator finds it in the dead letters with reason "{reason}"'))
def found_dead(caller: Caller, reason: str) -> None:
    dead = operators_dead_letter(caller)
    result = caller.result()
    assert (dead.job_id, dead.reason, dead.attempts) == (int(caller.result_id), reason, result.attempts)
    assert caller.key in dead.last_error


@then(parsers.parse("its result went {statuses} under one id"))
def went_through(caller: Caller, statuses: str) -> None:
    # Polls while the worker ran may also have caught the attempt RUNNING, between READY and the end.
    seen = [status for status in caller.statuses if status != TaskResultStatus.RUNNING]
    assert seen == statuses.split(", ")
