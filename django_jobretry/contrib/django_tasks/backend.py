"""``JobRetryBackend``: Django's task framework (``django.tasks``) on our jobs.

Configured in ``TASKS``; every ``@task`` of the backend becomes a job with a
retry policy, run by ``manage.py runworker`` with the same leases, fencing,
backoff and dead letters as ``@job`` jobs (docs/django-tasks.md). Importing
this module touches no model and no database, so Django can load it while
it reads settings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

import django
from django.core.exceptions import ImproperlyConfigured

try:
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskResult
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued
except ImportError:  # pragma: no cover - exercised by the Django 5.2 session (noxfile.py)
    raise ImproperlyConfigured(
        f"django_jobretry.backends.JobRetryBackend needs Django's task framework (django.tasks, "
        f"Django 6.0 or newer); this is Django {django.get_version()}. The rest of django_jobretry "
        "(@job, the worker, the admin) works without it."
    ) from None

from django_jobretry.conf.uniqueness import NOT_UNIQUE
from django_jobretry.contrib.django_tasks.checks import UndeclaredQueue, check_backend
from django_jobretry.contrib.django_tasks.runs import TaskRun, send_task_signal, task_of
from django_jobretry.contrib.django_tasks.task_class import JobRetryTask
from django_jobretry.exceptions import InvalidJob, UnsupportedArgument
from django_jobretry.registry import registry
from django_jobretry.validation import check_queue_name, check_task_name

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")

#: Attribute :func:`retry_policy` sets on a task function.
POLICY_ATTRIBUTE = "jobretry_policy"


def retry_policy(name: str) -> Callable[[F], F]:
    """Run a task under the JOBRETRY policy ``name``; apply it below ``@task``.

    ``OPTIONS["task_policies"]`` in ``TASKS`` wins over it, so a deploy can
    change a task's policy without a code change; so does ``@task(policy=...)``
    on Django 6.1, where this decorator is one way of two to say the same.
    """
    if not isinstance(name, str):
        raise InvalidJob(f"retry_policy({name!r}): pass the name of a policy in JOBRETRY['POLICIES']")

    def mark(func: F) -> F:
        setattr(func, POLICY_ATTRIBUTE, name)
        return func

    return mark


class JobRetryBackend(BaseTaskBackend):
    """Stores each enqueued task as a job; ``runworker`` runs it with retries and dead letters."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True
    #: Django 6.1's ``@task`` passes the keywords it does not know (``policy=``, ``timeout=``, ...) to
    #: the backend's task class; Django 6.0's ``@task`` takes none, so there it stays Django's own.
    task_class = JobRetryTask if django.VERSION >= (6, 1) else Task

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        # A bad OPTIONS must not crash the import of a tasks.py (tasks are validated then, before
        # any system check runs): whatever cannot be used is ignored here and reported by check().
        options = self.options if isinstance(self.options, dict) else {}
        self.default_policy: str = options.get("policy", "default")
        mapping = options.get("task_policies")
        self.task_policies: dict[str, str] = mapping if isinstance(mapping, dict) else {}

    def policy_name(self, task: Task[..., Any]) -> str:
        """The policy a task of this backend runs under; the first of these that names one applies.

        OPTIONS["task_policies"] (a deploy overrides the code without changing
        it), ``@task(policy=...)``, ``@retry_policy``, then OPTIONS["policy"].
        """
        if task.module_path in self.task_policies:
            return self.task_policies[task.module_path]
        declared = task.policy if isinstance(task, JobRetryTask) else None
        return declared or getattr(task.func, POLICY_ATTRIBUTE, None) or self.default_policy

    def validate_task(self, task: Task[..., Any]) -> None:
        """Django's checks, ours on the stored names, then register the task for the worker."""
        if self.queues and task.queue_name not in self.queues:
            raise UndeclaredQueue(self, task)  # Django's check, with the task, the setting and the fix
        super().validate_task(task)
        try:
            check_task_name(task.module_path)
            check_queue_name(task.queue_name)
        except InvalidJob as exc:
            raise InvalidTask(str(exc)) from None
        # The first Task of a function (its @task) stays registered: a .using() copy
        # validated later must not change what get_result() reports as the task.
        registered = registry.get(task.module_path)
        if not (isinstance(registered, TaskRun) and registered.task.func is task.func):
            registry.register(TaskRun(task))

    def enqueue(self, task: Task[P, R], args: Any, kwargs: Any) -> TaskResult[P, R]:
        from django_jobretry.contrib.django_tasks.results import result_of
        from django_jobretry.jobs.enqueue import JobSpec, enqueue_call

        self.validate_task(task)
        spec = JobSpec(
            func=task.func,
            name=task.module_path,
            queue_name=task.queue_name,
            policy=self.policy_name(task),
            priority=task.priority,
            run_after=task.run_after,
            unique=task.unique if isinstance(task, JobRetryTask) else NOT_UNIQUE,
            takes_context=task.takes_context,
        )
        try:
            enqueued = enqueue_call(spec, tuple(args), dict(kwargs))
        except UnsupportedArgument as exc:  # a TypeError in Django's words, as its own backends raise
            raise exc.in_djangos_words() from None
        result = result_of(enqueued.job, task, self.alias, deduplicated=not enqueued.inserted)
        if enqueued.inserted:  # not for the job that held its unique key: nothing was enqueued
            send_task_signal(task_enqueued, task, result)
        return cast("TaskResult[P, R]", result)  # result_of reads any task's row

    def get_result(self, result_id: str) -> TaskResult[..., Any]:
        from django_jobretry.contrib.django_tasks.results import enqueued_task, find_row, result_of

        row = find_row(result_id)
        task = task_of(row.task_name)
        if task is None:
            raise TaskResultDoesNotExist(
                f"result {result_id!r} belongs to {row.task_name!r}, which is not a django.tasks task "
                "registered in this process (import the module that defines it)"
            )
        return result_of(row, enqueued_task(row, task), self.alias)

    def check(self, **kwargs: Any) -> list[Any]:
        return check_backend(self)
