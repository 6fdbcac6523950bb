"""The task registry: the only way a task name read from the database becomes code.

Filled when apps load (each installed app's ``jobs.py`` is imported, like
``admin.py``). The worker looks names up here and never imports a dotted
path taken from a row (docs/design.md#rule-10).

It also owns the one lookup of a stored job's retry policy,
:func:`policy_for`, used by the worker and by requeue alike.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

from django.apps import apps

from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.uniqueness import Uniqueness
from django_jobretry.exceptions import DuplicateTaskName, UnknownPolicy
from django_jobretry.policy import RetryPolicy

logger = logging.getLogger("django_jobretry")

#: policy_name stored for jobs whose policy is a RetryPolicy given inline to
#: @job; it cannot collide with a settings policy name (no parentheses there).
INLINE_POLICY = "(inline)"
#: The policy every lookup falls back to; JOBRETRY always defines it.
FALLBACK_POLICY = "default"


class TaskDefinition(Protocol):
    """What the registry needs of a registered task (``@job`` builds one)."""

    @property
    def name(self) -> str: ...

    #: Runs one attempt; what it returns is kept as jobs/results.py says, or as a ``Kept`` gives it.
    @property
    def func(self) -> Callable[..., Any]: ...

    @property
    def policy(self) -> str | RetryPolicy: ...

    @property
    def timeout(self) -> timedelta | None: ...

    #: The priority its jobs get unless an enqueue says otherwise.
    @property
    def priority(self) -> int: ...

    #: The queue its jobs go to unless an enqueue says otherwise.
    @property
    def queue_name(self) -> str: ...

    #: Whether ``func``'s first parameter is django.tasks' context: the job's arguments bind after it.
    @property
    def takes_context(self) -> bool: ...

    #: How its enqueues, and its schedules' runs, are deduplicated (conf/uniqueness.py).
    @property
    def unique(self) -> Uniqueness: ...

    #: Whether what its function returns is stored on the job; None: as its policy says.
    @property
    def keep_result(self) -> bool | None: ...


class TaskRegistry:
    """Task name -> task definition, safe to read from worker threads."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskDefinition] = {}
        #: Task name -> module, for tasks first registered once Django had started (see registered_late).
        self._late: dict[str, str] = {}
        self._lock = threading.Lock()

    def register(self, definition: TaskDefinition) -> None:
        with self._lock:
            existing = self._tasks.get(definition.name)
            # Re-importing a module (autoreload, tests) registers the same
            # function again; only a different function is a conflict.
            if existing is not None and _qualname(existing) != _qualname(definition):
                raise DuplicateTaskName(
                    f"task name {definition.name!r} is used by both {_qualname(existing)} and "
                    f"{_qualname(definition)}; pass name=... to @job to tell them apart"
                )
            if existing is None and apps.ready:
                self._late[definition.name] = definition.func.__module__
            self._tasks[definition.name] = definition

    def get(self, name: str) -> TaskDefinition | None:
        return self._tasks.get(name)

    def names(self) -> list[str]:
        return sorted(self._tasks)

    def registered_late(self) -> dict[str, str]:
        """Task name -> module of the tasks registered after Django's start-up (``apps.ready``).

        A worker registers only what start-up imports (task_modules.py), so
        it will not have these: their module was imported later, by a URL
        configuration, a view or a shell.
        """
        return dict(self._late)


def _qualname(definition: TaskDefinition) -> str:
    return f"{definition.func.__module__}.{definition.func.__qualname__}"


registry = TaskRegistry()


def resolve_policy(policy: str | RetryPolicy) -> tuple[str, RetryPolicy]:
    """(name to store on a new job, policy) for ``@job(policy=...)``; strict.

    An unknown name raises :class:`UnknownPolicy`: a job is never stored
    under a policy that does not exist.
    """
    if isinstance(policy, RetryPolicy):
        return INLINE_POLICY, policy
    return policy, jobretry_settings.policy(policy)


def policy_for(task_name: str, policy_name: str) -> RetryPolicy:
    """The policy of a stored job (or dead letter), found by the names on its row.

    An inline policy is the registered task's. When the policy cannot be
    found - a renamed settings policy, or a task that is not registered in
    this process - the documented fallback is JOBRETRY's "default" policy,
    and a warning says so: behaviour must never change silently.
    """
    if policy_name == INLINE_POLICY:
        definition = registry.get(task_name)
        if definition is not None and isinstance(definition.policy, RetryPolicy):
            return definition.policy
        why = f"task {task_name!r} with an inline policy is not registered in this process"
    else:
        try:
            return jobretry_settings.policy(policy_name)
        except UnknownPolicy:
            why = f"JOBRETRY['POLICIES'] has no policy {policy_name!r}"
    logger.warning(
        "%s; using the %r policy",
        why,
        FALLBACK_POLICY,
        extra={"task": task_name, "policy": policy_name, "outcome": "policy_fallback"},
    )
    return jobretry_settings.policy(FALLBACK_POLICY)


def time_limit(task_name: str, policy_name: str) -> timedelta | None:
    """How long one attempt may run: the task's own ``timeout``, else its policy's, else no limit."""
    definition = registry.get(task_name)
    if definition is not None and definition.timeout is not None:
        return definition.timeout
    return policy_for(task_name, policy_name).timeout


def keeps_result(task_name: str, policy_name: str) -> bool:
    """Whether a job's return value is stored: the task's own ``keep_result``, else its policy's.

    Read by the worker as the attempt ends, like :func:`time_limit`: a policy
    edited in the settings applies to the jobs already waiting.
    """
    definition = registry.get(task_name)
    if definition is not None and definition.keep_result is not None:
        return definition.keep_result
    return policy_for(task_name, policy_name).keep_result
