"""JobRetryBackend's classes: its ``Task`` with options per task, and its ``TaskResult``.

**The task**: ``@task(policy=..., timeout=..., unique_args=..., concurrency=...)``.

Django 6.1's ``task()`` hands the keywords it does not know to its backend's
``task_class``; JobRetryBackend's is :class:`JobRetryTask` there. Django
6.0's ``task()`` takes no such keyword, so on 6.0 the backend keeps Django's
``Task``, and ``OPTIONS["task_policies"]`` and ``@retry_policy`` choose a
policy (docs/django-tasks.md). Each option is checked where the task is
declared, by the rule ``@job`` applies to the same option, and before the
backend registers the task: a mistake is an ``InvalidTask`` at import
naming the task, the option and the value (check E025 in a module imported
at start-up), not a failure at the first enqueue, and a refused task
leaves nothing registered.

**The result**: :class:`JobRetryTaskResult`, Django's ``TaskResult`` saying
whether its ``enqueue()`` was deduplicated. ``TaskResult`` is a frozen
dataclass with slots: no attribute can be added to one, so every result
this backend hands out is of this subclass. Its one field takes no part in
equality, so a fetched result still equals the enqueued one.

Touches no model: the backend module, and ``django_jobretry.backends``,
import this one while Django reads the settings.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Self, cast

from django.tasks.base import Task, TaskResult
from django.tasks.exceptions import InvalidTask

from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.task_options import Declared, TaskOptions
from django_jobretry.conf.uniqueness import OnConflict, Uniqueness
from django_jobretry.display import did_you_mean
from django_jobretry.exceptions import InvalidJob, InvalidSettings, UnknownPolicy
from django_jobretry.limits import declare_task
from django_jobretry.policy.limits import InvalidLimit
from django_jobretry.validation import check_timeout

if TYPE_CHECKING:
    _AnyTask = Task[..., Any]
    _Result = TaskResult[Any, Any]
else:  # Django's Task and TaskResult are generic only in their stubs
    _AnyTask = Task
    _Result = TaskResult

#: Django's own keywords of ``@task`` (``run_after`` only through ``.using()``), for messages.
DJANGO_OPTIONS = ("priority", "queue_name", "backend", "takes_context")


class InvalidTaskOption(InvalidTask):
    """A per-task option JobRetryBackend refuses; ``hint`` is the fix, for checks E025 and E027."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.hint = f"Fix that option of the @task(...). {ALLOWED}"


class UnknownTaskPolicy(InvalidTaskOption):
    """``@task(policy=...)`` names a policy JOBRETRY["POLICIES"] does not define.

    Told apart from the other refusals because settings can lose a policy
    after the declaration: check E027 looks again, and leaves to E009 the
    policy a task runs under.
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRetryTask(_AnyTask, TaskOptions):
    """Django's ``Task`` with JobRetryBackend's options; Django 6.1's ``@task(...)`` builds it.

    The options it shares with ``@job`` are :class:`TaskOptions`' fields,
    checked by its ``declare``; ``policy`` and ``unique_key`` are its own.
    Frozen like Django's: ``.using()`` and pickling build a new one through
    the constructor, so every copy is checked the same way.
    """

    #: A policy name from JOBRETRY["POLICIES"]; OPTIONS["task_policies"] wins over it (a deploy's override).
    policy: str | None = None
    #: One key for every enqueue of the task; ``.using(unique_key=...)`` sets one per call.
    unique_key: str | None = None

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        """Refuse a keyword that no field takes, naming it: the dataclass would raise a bare TypeError.

        Django's ``task()``, ``.using()`` and unpickling all build a task
        through here with keywords only.
        """
        unknown = sorted(set(kwargs) - _FIELDS)
        if unknown:
            raise InvalidTaskOption(
                f"@task {_path_of(kwargs.get('func'))}: unknown option {unknown[0]!r}."
                f"{did_you_mean(unknown, OPTIONS + DJANGO_OPTIONS)} {ALLOWED}"
            )
        return object.__new__(cls)

    def __post_init__(self) -> None:
        """Check the options and store them normalised; then the backend validates and registers the task."""
        declared = declare(self)  # timeout a timedelta from here on
        object.__setattr__(self, "timeout", declared.timeout)
        object.__setattr__(self, "unique_args", declared.unique.args)
        object.__setattr__(self, "unique_for", declared.unique.window)
        Task.__post_init__(self)  # the backend's validate_task: Django's checks, ours, the registry
        declare_task(self.module_path, declared.limit)  # after registering, as @job does

    @property
    def unique(self) -> Uniqueness:
        """How its enqueues are deduplicated, as the enqueue service takes it (none by default).

        Read at every enqueue: the options were checked and normalised when
        the task was declared (``__post_init__``), so they are only put together
        here, without reading the function's signature again.
        """
        window = self.unique_for if isinstance(self.unique_for, timedelta) else None
        return Uniqueness(self.unique_key, self.unique_args, window, self.on_conflict)

    @property
    def time_limit(self) -> timedelta | None:
        """Its own ``timeout`` as the worker reads it; None: its policy's, if any."""
        return check_timeout(self.timeout)

    def using(
        self,
        *,
        unique_key: str | None = None,
        unique_for: timedelta | float | None = None,
        on_conflict: OnConflict | None = None,
        **django_options: Any,
    ) -> JobRetryTask:
        """Django's ``.using()``, and deduplication per call as ``@job``'s ``.using()`` takes it.

        ``unique_key`` wins over ``unique_args``; ``unique_for`` and
        ``on_conflict`` replace the task's. The copy is checked like the task.
        """
        changed = cast("JobRetryTask", Task.using(self, **django_options))
        unique = {"unique_key": unique_key, "unique_for": unique_for, "on_conflict": on_conflict}
        given: dict[str, Any] = {name: value for name, value in unique.items() if value is not None}
        return dataclasses.replace(changed, **given) if given else changed


#: Every keyword the constructor takes: Django's fields and ours.
_FIELDS = frozenset(f.name for f in fields(JobRetryTask))
#: The keywords JobRetryBackend's ``@task`` takes beside Django's own, in the order the hints list them:
#: ``policy``, then the options shared with ``@job`` (TaskOptions), ``unique_key`` before ``unique_args``.
_SHARED = tuple(f.name for f in fields(TaskOptions))
_UNIQUE = _SHARED.index("unique_args")
OPTIONS = ("policy", *_SHARED[:_UNIQUE], "unique_key", *_SHARED[_UNIQUE:])
#: The keywords allowed, for the unknown-keyword message and every hint.
ALLOWED = f"JobRetryBackend's @task takes {', '.join(OPTIONS)}, beside Django's {', '.join(DJANGO_OPTIONS)}."


def declare(task: JobRetryTask) -> Declared:
    """The task's options checked, policy first; InvalidTaskOption for the first bad one."""
    where = f"@task {task.module_path}"
    _check_policy(where, task.policy)
    try:
        return task.declare(where, task.func, takes_context=task.takes_context, unique_key=task.unique_key)
    except (InvalidJob, InvalidLimit) as exc:
        raise InvalidTaskOption(str(exc)) from None


def _check_policy(where: str, policy: object) -> None:
    """A policy is a name JOBRETRY["POLICIES"] defines: a job stores the name, and workers look it up."""
    if policy is None:
        return
    if not isinstance(policy, str):
        raise InvalidTaskOption(
            f"{where}: policy {policy!r} is invalid: the name of a policy in JOBRETRY['POLICIES'] "
            "(a task's jobs store their policy's name, so an inline RetryPolicy cannot be used)"
        )
    try:
        jobretry_settings.policy(policy)
    except UnknownPolicy as exc:
        raise UnknownTaskPolicy(
            f"{where}: policy {policy!r} is not a policy in JOBRETRY['POLICIES'], which defines "
            f"{sorted(exc.known)}.{did_you_mean([policy], exc.known)}"
        ) from None
    except InvalidSettings:
        return  # JOBRETRY is invalid: its own checks say so; E009 or E027 look at the name once it is fixed


def _path_of(func: object) -> str:
    """The module path Django names a task by, for a message about a task not built yet."""
    module, name = getattr(func, "__module__", None), getattr(func, "__qualname__", None)
    return f"{module}.{name}" if module and name else repr(func)


# django-stubs declares TaskResult a plain dataclass; Django's own is frozen, as this one must be.
@dataclass(frozen=True, slots=True, kw_only=True)
class JobRetryTaskResult(_Result):  # type: ignore[misc]
    """A task result of JobRetryBackend (docs/django-tasks.md#deduplicated-enqueues)."""

    #: True on the result of an ``enqueue()`` whose unique key a job already held: the result is
    #: that job's, not a new one's. False on a new task's result and on any ``get_result()``.
    deduplicated: bool = field(default=False, compare=False)
