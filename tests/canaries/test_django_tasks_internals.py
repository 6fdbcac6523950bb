"""Canaries on the Django task framework details the backend relies on (contrib/django_tasks/).

``django.tasks`` is young (6.0) and changed in 6.1; the backend builds
TaskResults itself, calls tasks with a TaskContext and reads Task's fields.
One check per detail, naming the backend file to revisit.
"""

from __future__ import annotations

import dataclasses
import inspect
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.canaries.canary import Canary, require

pytest.importorskip("django.tasks", reason="Django 6+ has django.tasks")

TASKS = "django_jobretry/contrib/django_tasks/"
#: The TaskResult fields results.py passes, by name.
RESULT_FIELDS = (
    "task",
    "id",
    "status",
    "enqueued_at",
    "started_at",
    "finished_at",
    "last_attempted_at",
    "args",
    "kwargs",
    "backend",
    "errors",
    "worker_ids",
)


def double(n: int) -> int:
    """A module-level function, as Django requires of a task."""
    return 2 * n


def a_task() -> Any:
    from django.tasks import task

    return task(double)


def task_result_takes_our_fields() -> None:
    from django.tasks.base import TaskResult

    names = {field.name for field in dataclasses.fields(TaskResult)}
    require(set(RESULT_FIELDS) <= names, f"TaskResult lacks {sorted(set(RESULT_FIELDS) - names)}")


def return_value_reads_the_private_slot() -> None:
    from django.tasks.base import TaskResult, TaskResultStatus

    now = datetime.now(UTC)
    result: Any = TaskResult(
        task=a_task(), id="1", status=TaskResultStatus.SUCCESSFUL, enqueued_at=now, started_at=now,
        finished_at=now, last_attempted_at=now, args=[], kwargs={}, backend="default", errors=[],
        worker_ids=[],
    )  # fmt: skip
    object.__setattr__(result, "_return_value", 42)
    require(result.return_value == 42, "TaskResult.return_value does not read _return_value")


def task_result_is_a_frozen_slotted_dataclass() -> None:
    from django.tasks.base import TaskResult

    params = getattr(TaskResult, "__dataclass_params__", None)
    require(params is not None and params.frozen, "TaskResult is not a frozen dataclass")
    require("__slots__" in vars(TaskResult), "TaskResult has no __slots__")


def unsupported_type_wording() -> None:
    from django.utils.json import normalize_json

    try:
        normalize_json({"when": datetime.now(UTC)})
    except TypeError as exc:
        wording = str(exc)
    else:
        wording = "no TypeError"
    require(wording == "Unsupported type: <class 'datetime.datetime'>", f"normalize_json says {wording!r}")


def undeclared_queue_wording() -> None:
    from django.tasks.backends.dummy import DummyBackend
    from django.tasks.exceptions import InvalidTask

    elsewhere = a_task()
    object.__setattr__(elsewhere, "queue_name", "elsewhere")  # past the configured backend's own check
    try:
        DummyBackend("canary", {"QUEUES": ["default"]}).validate_task(elsewhere)
    except InvalidTask as exc:
        wording = str(exc)
    else:
        wording = "no InvalidTask"
    require(wording == "Queue 'elsewhere' is not valid for backend.", f"validate_task says {wording!r}")


def statuses_exist() -> None:
    from django.tasks.base import TaskResultStatus

    names = {status.name for status in TaskResultStatus}
    require({"READY", "RUNNING", "SUCCESSFUL", "FAILED"} <= names, f"TaskResultStatus is {sorted(names)}")


def task_error_fields() -> None:
    from django.tasks.base import TaskError

    names = {field.name for field in dataclasses.fields(TaskError)}
    require({"exception_class_path", "traceback"} <= names, f"TaskError has {sorted(names)}")


def task_context_takes_the_result() -> None:
    from django.tasks.base import TaskContext

    require("task_result" in {f.name for f in dataclasses.fields(TaskContext)}, "TaskContext(task_result=)")


def task_fields_we_read() -> None:
    task = a_task()
    for name in ("func", "module_path", "queue_name", "priority", "run_after", "takes_context", "backend"):
        require(hasattr(task, name), f"Task has no {name}")
    require(callable(getattr(task, "call", None)) and callable(getattr(task, "get_backend", None)), "call()")


def backend_base_methods() -> None:
    from django.tasks.backends.base import BaseTaskBackend

    parameters = list(inspect.signature(BaseTaskBackend.__init__).parameters)
    require(parameters[:3] == ["self", "alias", "params"], f"BaseTaskBackend.__init__{parameters}")
    for name in ("enqueue", "get_result", "validate_task", "check", "queues", "options"):
        require(hasattr(BaseTaskBackend, name) or name in ("queues", "options"), f"BaseTaskBackend.{name}")
    for flag in ("supports_defer", "supports_async_task", "supports_get_result", "supports_priority"):
        require(hasattr(BaseTaskBackend, flag), f"BaseTaskBackend.{flag}")


def signals_and_exceptions() -> None:
    from django.dispatch import Signal
    from django.tasks import DEFAULT_TASK_QUEUE_NAME, signals
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist

    for name in ("task_enqueued", "task_started", "task_finished"):
        require(isinstance(getattr(signals, name, None), Signal), f"django.tasks.signals.{name}")
    require(
        issubclass(InvalidTask, Exception) and issubclass(TaskResultDoesNotExist, Exception), "exceptions"
    )
    require(DEFAULT_TASK_QUEUE_NAME == "default", f"DEFAULT_TASK_QUEUE_NAME is {DEFAULT_TASK_QUEUE_NAME!r}")


CANARIES = [
    Canary(
        "django",
        "django.tasks.base.TaskResult fields",
        "build the TaskResult of a job or dead letter",
        f"{TASKS}results.py",
        task_result_takes_our_fields,
    ),
    Canary(
        "django",
        "TaskResult.return_value reads _return_value",
        "give a finished result its return value",
        f"{TASKS}results.py, runs.py",
        return_value_reads_the_private_slot,
    ),
    Canary(
        "django",
        "TaskResult is a frozen dataclass with slots",
        "carry deduplicated on a subclass, since no attribute can be set on one",
        f"{TASKS}task_class.py (JobRetryTaskResult)",
        task_result_is_a_frozen_slotted_dataclass,
    ),
    Canary(
        "django",
        "django.utils.json.normalize_json's 'Unsupported type' wording",
        "refuse an argument JSON has no form for in Django's words",
        f"{TASKS}backend.py, django_jobretry/exceptions.py (UnsupportedArgument)",
        unsupported_type_wording,
    ),
    Canary(
        "django",
        "BaseTaskBackend.validate_task's 'Queue ... is not valid for backend.' wording",
        "refuse a queue QUEUES does not list in Django's words",
        f"{TASKS}backend.py (UndeclaredQueue)",
        undeclared_queue_wording,
    ),
    Canary(
        "django",
        "django.tasks.base.TaskResultStatus",
        "map job states to task statuses",
        f"{TASKS}results.py",
        statuses_exist,
    ),
    Canary(
        "django",
        "django.tasks.base.TaskError fields",
        "report each failed attempt",
        f"{TASKS}results.py",
        task_error_fields,
    ),
    Canary(
        "django",
        "django.tasks.base.TaskContext(task_result=)",
        "run takes_context tasks",
        f"{TASKS}runs.py",
        task_context_takes_the_result,
    ),
    Canary(
        "django",
        "django.tasks.base.Task fields and call()",
        "enqueue and run a task as a job",
        f"{TASKS}backend.py, runs.py",
        task_fields_we_read,
    ),
    Canary(
        "django",
        "django.tasks.backends.base.BaseTaskBackend",
        "be a task backend",
        f"{TASKS}backend.py",
        backend_base_methods,
    ),
    Canary(
        "django",
        "django.tasks signals, exceptions, DEFAULT_TASK_QUEUE_NAME",
        "announce and refuse as Django's own backends do",
        f"{TASKS}backend.py",
        signals_and_exceptions,
    ),
]


@pytest.mark.parametrize("canary", CANARIES, ids=lambda canary: canary.id)
def test_django_tasks_internal(canary: Canary) -> None:
    canary.run()
