"""System checks of a ``JobRetryBackend`` in ``TASKS``: `manage.py check` names the bad option.

Its configuration (E020-E024, E026) and the per-task options of its
registered ``@task(...)`` (E027, Django 6.1).

Django runs them through ``BaseTaskBackend.check()``. Ids are stable
(documented in docs/settings.md#system-checks); never renumber them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.core.checks import CheckMessage, Error
from django.tasks import DEFAULT_TASK_QUEUE_NAME
from django.tasks.exceptions import InvalidTask

from django_jobretry.conf import jobretry_settings
from django_jobretry.contrib.django_tasks.runs import TaskRun
from django_jobretry.contrib.django_tasks.task_class import (
    InvalidTaskOption,
    JobRetryTask,
    UnknownTaskPolicy,
    declare,
)
from django_jobretry.display.suggestions import did_you_mean
from django_jobretry.exceptions import InvalidJob, JobRetryError
from django_jobretry.registry import registry
from django_jobretry.schedules.declare import InvalidSchedule, from_mapping
from django_jobretry.validation import check_queue_name

if TYPE_CHECKING:
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task

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
