"""django.tasks tasks as registered jobs: how the worker runs one, and the task signals it sends.

A ``@task`` of a JobRetryBackend is registered under its module path when
Django validates it (at decoration), so the worker finds it like any
``@job``: through the registry, never by importing a path read from a row
(docs/design.md#rule-10). Only imported by :mod:`django_jobretry.contrib.django_tasks.backend`,
which makes sure ``django.tasks`` exists.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.tasks.base import Task, TaskContext, TaskResult, TaskResultStatus
from django.tasks.signals import task_finished, task_started
from django.utils.json import normalize_json

from django_jobretry import signals
from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.uniqueness import NOT_UNIQUE, Uniqueness
from django_jobretry.context import current_job
from django_jobretry.contrib.django_tasks.task_class import JobRetryTask
from django_jobretry.exceptions import InvalidJob, StoredError, UnstorableResult
from django_jobretry.registry import registry
from django_jobretry.validation import check_result, check_result_shape

if TYPE_CHECKING:
    from django_jobretry.jobs.claimed import Kept, Succeeded


@dataclass(frozen=True)
class TaskRun:
    """The registry's entry for a django.tasks task; ``func`` runs one attempt of it."""

    task: Task[..., Any]
    name: str = field(init=False)
    #: Runs one attempt; named like the task's function, for messages and logs.
    func: Callable[..., Any] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.task.module_path)

        def attempt(*args: Any, **kwargs: Any) -> Any:
            return self.run(*args, **kwargs)

        async def attempt_async(*args: Any, **kwargs: Any) -> Any:
            return await self.arun(*args, **kwargs)

        # An async task's attempt is a coroutine too, so the worker runs it on its event loop.
        runs = attempt_async if inspect.iscoroutinefunction(self.task.func) else attempt
        object.__setattr__(self, "func", functools.update_wrapper(runs, self.task.func))

    @property
    def takes_context(self) -> bool:
        """``func`` passes the task its context first: a job's arguments are the rest."""
        return self.task.takes_context

    @property
    def timeout(self) -> timedelta | None:
        """How long one attempt may run: ``@task(timeout=...)`` (Django 6.1); None: its policy's."""
        return self.task.time_limit if isinstance(self.task, JobRetryTask) else None

    @property
    def unique(self) -> Uniqueness:
        """How its enqueues are deduplicated: ``@task(unique_args=...)`` and the rest (Django 6.1)."""
        return self.task.unique if isinstance(self.task, JobRetryTask) else NOT_UNIQUE

    @property
    def keep_result(self) -> bool:
        """Always: a django.tasks task's return value is its result (``run`` returns it as a ``Kept``)."""
        return True

    @property
    def priority(self) -> int:
        """The priority of the decorated task (``@task(priority=...)``)."""
        return self.task.priority

    @property
    def queue_name(self) -> str:
        """The queue of the decorated task (``@task(queue_name=...)``)."""
        return self.task.queue_name

    @property
    def policy(self) -> str:
        """The policy the task's backend enqueues it under now (settings may have changed since)."""
        try:
            backend = self.task.get_backend()
        except ImproperlyConfigured:  # its alias left TASKS: what a job gets without a policy
            return "default"
        policy_name = getattr(backend, "policy_name", None)
        return policy_name(self.task) if callable(policy_name) else "default"

    def run(self, *args: Any, **kwargs: Any) -> Kept:
        """One attempt: send ``task_started``, call the task (with its context), keep its value and end."""
        result = self._started()
        if self.task.takes_context:
            value = self.task.call(TaskContext(task_result=result), *args, **kwargs)
        else:
            value = self.task.call(*args, **kwargs)
        return self._kept(result, value)

    async def arun(self, *args: Any, **kwargs: Any) -> Kept:
        """:meth:`run` of an ``async def`` task, on the worker's event loop (receivers in Django's thread)."""
        result = await sync_to_async(self._started)()  # it reads the job's row: not on the loop
        if self.task.takes_context:
            value = await self.task.acall(TaskContext(task_result=result), *args, **kwargs)
        else:
            value = await self.task.acall(*args, **kwargs)
        return self._kept(result, value)

    def _started(self) -> TaskResult[..., Any]:
        """The attempt's result as it starts, its ``task_started`` sent."""
        result = running_result(self.task)
        send_task_signal(task_started, self.task, result)
        return result

    def _kept(self, result: TaskResult[..., Any], value: Any) -> Kept:
        from django_jobretry.jobs.claimed import Kept

        # Without the arguments, which the job holds: they may nest deeper than pickle goes. Without
        # the task: on Django 6.0 a Task pickles its function by name, which names the Task instead
        # (a process pool's child could not send it back); the main loop has it in its registry.
        running = dataclasses.replace(result, task=None, args=[], kwargs={})  # type: ignore[arg-type]
        return Kept(_stored(self.name, value), functools.partial(_finish, running))


def _finish(running: TaskResult[..., Any], outcome: Succeeded, finished_at: datetime) -> None:
    """``task_finished`` of a success (``Kept.finish``): the result its attempt read as it started, finished
    at the time the success statement wrote. Called on the main loop, it reads nothing again."""
    task = task_of(outcome.job.task_name)
    if task is None:  # it ran from this registry a moment ago: cannot happen, but never fail the loop
        return
    args, kwargs = outcome.job.arguments()
    done = dataclasses.replace(
        running,
        task=task,
        status=TaskResultStatus.SUCCESSFUL,
        finished_at=finished_at,
        args=args,
        kwargs=kwargs,
    )
    object.__setattr__(done, "_return_value", json.loads(outcome.result) if outcome.result else None)
    send_task_signal(task_finished, done.task, done)


def _stored(task_name: str, value: Any) -> str:
    """``value`` as JSON text, after Django's conversion; or UnstorableResult: fatal, it would fail again.

    The conversion recurses, so depth and size are checked first, by the
    rule arguments follow; a recursion limit reached anyway (MAX_ARGS_DEPTH
    near 1,000) is the value's shape too, never a failure worth a retry.
    """
    limits = {"max_bytes": jobretry_settings.max_args_bytes, "max_depth": jobretry_settings.max_args_depth}
    try:
        check_result_shape(task_name, value, **limits)
        return check_result(task_name, normalize_json(value), **limits)
    except InvalidJob as exc:
        raise UnstorableResult(str(exc)) from None
    except RecursionError:
        raise UnstorableResult(
            f"the return value of task {task_name!r} is nested too deep for Django's JSON conversion "
            "(Python's recursion limit); return a flatter value"
        ) from None
    except (TypeError, ValueError) as exc:
        raise UnstorableResult(
            f"task {task_name!r} returned a value that is not JSON ({exc}); "
            "return plain data (str, int, float, bool, None, list, dict)"
        ) from None


def task_of(task_name: str) -> Task[..., Any] | None:
    """The django.tasks Task registered under ``task_name`` in this process, if any."""
    definition = registry.get(task_name)
    return definition.task if isinstance(definition, TaskRun) else None


def running_result(task: Task[..., Any]) -> TaskResult[..., Any]:
    """The result of the attempt this worker thread runs now, read from its row."""
    from django_jobretry.contrib.django_tasks.results import enqueued_task, result_of
    from django_jobretry.models import Job

    context = current_job()
    if context is None:
        raise RuntimeError(f"task {task.module_path!r} ran outside a worker; call it with .call()")
    row = Job.objects.get(id=context.job_id)  # the worker holds the job's lease
    return result_of(row, enqueued_task(row, task), task.backend)


def send_task_signal(signal: Any, task: Task[..., Any], result: TaskResult[..., Any]) -> None:
    """A django.tasks signal with the task's backend class as sender; a failing receiver is logged."""
    extra = {"job_id": result.id, "task": task.module_path, "outcome": "signal_error"}
    signals.send(signal, type(task.get_backend()), extra, task_result=result)


def _on_dead_lettered(
    sender: type,
    *,
    dead_letter_id: int | None = None,
    task_name: str = "",
    requeued_as: int | None = None,
    **kwargs: Any,
) -> None:
    """``task_finished`` of a task dead for good, read from its dead letter: lease recovery and
    an operator's cancel (which sends no ``task_name``) bury jobs with no attempt in hand.

    Not when the policy's ``requeue_budget`` revived it at once (``requeued_as``).
    Sent while the last attempt's error is being handled, as Django's
    ImmediateBackend does, so that Django's log line of it carries the
    traceback: a :class:`StoredError` holding the recorded one stands for it.
    """
    from django_jobretry.contrib.django_tasks.results import enqueued_task, result_of
    from django_jobretry.models import DeadLetter

    if dead_letter_id is None or requeued_as is not None or (task_name and task_of(task_name) is None):
        return
    # None: the dead letter was requeued or discarded before this receiver ran.
    row = DeadLetter.objects.filter(id=dead_letter_id).first()
    if row is None or (registered := task_of(row.task_name)) is None:
        return
    task = enqueued_task(row, registered)
    result = result_of(row, task, task.backend)
    try:
        if result.errors:  # always, but in a hand-edited row
            last = result.errors[-1]
            raise StoredError(f"{last.exception_class_path}, as its attempt recorded it:\n{last.traceback}")
        send_task_signal(task_finished, task, result)
    except StoredError:
        send_task_signal(task_finished, task, result)


signals.job_dead_lettered.connect(_on_dead_lettered, dispatch_uid="jobretry.django_tasks.dead")
