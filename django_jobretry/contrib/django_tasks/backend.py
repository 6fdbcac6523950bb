"""``JobRetryBackend``: Django's task framework (``django.tasks``) on our jobs.

Configured in ``TASKS``; every ``@task`` of the backend becomes a job with a
retry policy, run by ``manage.py runworker`` with the same leases, fencing,
backoff and dead letters as ``@job`` jobs (docs/django-tasks.md). Importing
this module touches no model and no database, so Django can load it while
it reads settings.

Its system checks are here too, since Django runs them through
``BaseTaskBackend.check()``: `manage.py check` names the bad option of its
configuration (E020-E024, E026) or of a registered ``@task(...)`` (E027,
Django 6.1). Ids are stable (documented in docs/settings.md#system-checks);
never renumber them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

import django
from django.apps import apps
from django.core.checks import CheckMessage, Error
from django.core.exceptions import ImproperlyConfigured

try:
    from django.tasks import DEFAULT_TASK_QUEUE_NAME
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

from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.uniqueness import NOT_UNIQUE
from django_jobretry.contrib.django_tasks.runs import TaskRun, send_task_signal, task_of
from django_jobretry.contrib.django_tasks.task_class import (
    InvalidTaskOption,
    JobRetryTask,
    UnknownTaskPolicy,
    declare,
)
from django_jobretry.display import did_you_mean
from django_jobretry.exceptions import InvalidJob, JobRetryError, UnsupportedArgument
from django_jobretry.registry import registry
from django_jobretry.schedules import InvalidSchedule, from_mapping
from django_jobretry.validation import check_queue_name, check_task_name

if TYPE_CHECKING:
    from django_jobretry.jobs.enqueue import JobSpec

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

    def job_spec(self, task: Task[..., Any]) -> JobSpec:
        """``task``, validated and registered, as the enqueue service takes it (a flow's steps too)."""
        from django_jobretry.jobs.enqueue import JobSpec

        self.validate_task(task)
        return JobSpec(
            func=task.func,
            name=task.module_path,
            queue_name=task.queue_name,
            policy=self.policy_name(task),
            priority=task.priority,
            run_after=task.run_after,
            unique=task.unique if isinstance(task, JobRetryTask) else NOT_UNIQUE,
            takes_context=task.takes_context,
        )

    def enqueue(self, task: Task[P, R], args: Any, kwargs: Any) -> TaskResult[P, R]:
        from django_jobretry.contrib.django_tasks.results import result_of
        from django_jobretry.jobs.enqueue import enqueue_call

        try:
            enqueued = enqueue_call(self.job_spec(task), tuple(args), dict(kwargs))
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


# System checks: check() above runs them (and validate_task raises UndeclaredQueue).

#: The keys OPTIONS may hold.
OPTION_KEYS = ("policy", "task_policies", "schedules")


class UndeclaredQueue(InvalidTask):
    """A ``@task`` names a queue its backend's ``QUEUES`` does not list; check E025 reports it at start-up.

    The message leads with the sentence Django's own ``validate_task`` raises, so a check of
    Django's wording (its test_unknown_queue_name) holds here too, then says which task and setting.
    """

    def __init__(self, backend: BaseTaskBackend, task: Task[..., Any]) -> None:
        queues = sorted(backend.queues, key=str)
        where = f'TASKS["{backend.alias}"]["QUEUES"]'
        unset = " (Django's default when QUEUES is not set)" if queues == [DEFAULT_TASK_QUEUE_NAME] else ""
        super().__init__(
            f"Queue '{task.queue_name}' is not valid for backend. "
            f"Task {task.module_path!r} uses the queue {task.queue_name!r}, which {where} does not list: "
            f"it lists {queues}{unset}.{did_you_mean([task.queue_name], map(str, queues))}"
        )
        #: The fix, for the check's hint.
        self.hint = f"Add {task.queue_name!r} to {where}, or give @task(queue_name=...) a queue it lists."


def check_backend(backend: BaseTaskBackend) -> list[CheckMessage]:
    """Every problem of one backend's configuration, each with its own id and hint."""
    where = f'TASKS["{backend.alias}"]'
    problems: list[CheckMessage] = []
    if not apps.is_installed("django_jobretry"):
        problems.append(
            Error(
                f"{where} uses JobRetryBackend, but django_jobretry is not in INSTALLED_APPS.",
                hint='Add "django_jobretry" to INSTALLED_APPS and run manage.py migrate.',
                id="django_jobretry.E020",
            )
        )
    options = backend.options
    if not isinstance(options, dict):
        return [*problems, _options_error(f'{where}["OPTIONS"] = {options!r} is not a dict.')]
    unknown = sorted(str(key) for key in options if key not in OPTION_KEYS)
    if unknown:
        message = f'{where}["OPTIONS"] has unknown key(s) {unknown}.{did_you_mean(unknown, OPTION_KEYS)}'
        problems.append(_options_error(message))
    problems += _policy_problems(where, options)
    problems += _schedule_problems(where, options.get("schedules", {}))
    for queue in sorted(backend.queues, key=str):
        try:
            check_queue_name(queue)
        except InvalidJob as exc:
            problems.append(Error(f'{where}["QUEUES"]: {exc}', id="django_jobretry.E024"))
    return problems + _task_option_problems(backend)


def _task_option_problems(backend: BaseTaskBackend) -> list[CheckMessage]:
    """E027: a registered ``@task(...)`` of this backend whose options its declaration would refuse now.

    A task is checked where it is declared, but ``policy=`` depends on
    settings: JOBRETRY may have been invalid then, or have lost the policy
    since. A policy the task runs under is left to E009, which reports the
    policy of every registered task; E027 names a ``policy=`` that
    ``OPTIONS["task_policies"]`` overrides, before the override is removed.
    """
    problems: list[CheckMessage] = []
    for name in registry.names():
        run = registry.get(name)
        task = run.task if isinstance(run, TaskRun) else None
        if run is None or not isinstance(task, JobRetryTask) or task.backend != backend.alias:
            continue
        try:
            declare(task)
        except InvalidTaskOption as exc:
            if not (isinstance(exc, UnknownTaskPolicy) and run.policy == task.policy):
                problems.append(Error(str(exc), hint=exc.hint, id="django_jobretry.E027"))
    return problems


def _schedule_problems(where: str, mappings: object) -> list[CheckMessage]:
    """E026: ``OPTIONS["schedules"]`` is not a dict of name -> schedule, or one of them is invalid."""
    label = f'{where}["OPTIONS"]["schedules"]'
    example = '{"nightly": {"task": "reports.tasks.build", "cron": "0 3 * * *", "tz": "Europe/Berlin"}}'
    if not isinstance(mappings, dict):
        return [
            Error(f"{label} = {mappings!r} is not a dict.", hint=f"e.g. {example}", id="django_jobretry.E026")
        ]
    problems: list[CheckMessage] = []
    for name, mapping in mappings.items():
        try:
            from_mapping(name, mapping, label)
        except InvalidSchedule as exc:
            problems.append(Error(f"{label}: {exc}", hint=f"e.g. {example}", id="django_jobretry.E026"))
    return problems


def _options_error(message: str) -> Error:
    return Error(
        message,
        hint='OPTIONS may hold "policy" (the JOBRETRY policy name of every task of this backend) and '
        '"task_policies" (task path -> policy name) and "schedules" '
        '(name -> {"task": ..., "cron" or "every": ...}), '
        'e.g. {"policy": "default", "task_policies": {"billing.tasks.send_invoice": "emails"}}.',
        id="django_jobretry.E021",
    )


def _policy_problems(where: str, options: dict[str, Any]) -> list[CheckMessage]:
    named: list[tuple[str, Any]] = []
    if "policy" in options:
        named.append((f'{where}["OPTIONS"]["policy"]', options["policy"]))
    mapping = options.get("task_policies", {})
    if not isinstance(mapping, dict):
        return [
            Error(
                f'{where}["OPTIONS"]["task_policies"] = {mapping!r} is not a dict.',
                hint='Map task paths to policy names: {"myapp.tasks.send_invoice": "payments"}.',
                id="django_jobretry.E023",
            )
        ]
    named += [(f'{where}["OPTIONS"]["task_policies"][{path!r}]', name) for path, name in mapping.items()]
    return [problem for label, name in named if (problem := _unknown_policy(label, name)) is not None]


def _unknown_policy(label: str, name: Any) -> Error | None:
    if isinstance(name, str):
        try:
            jobretry_settings.policy(name)
            return None
        except JobRetryError:
            pass
    try:
        known = sorted(jobretry_settings.policies)
    except JobRetryError:  # JOBRETRY itself is invalid: its own checks report that
        return None
    return Error(
        f"{label} = {name!r} is not a policy in JOBRETRY['POLICIES'].{did_you_mean([str(name)], known)}",
        hint=f"Use one of {known}, or define it in JOBRETRY['POLICIES'].",
        id="django_jobretry.E022",
    )
