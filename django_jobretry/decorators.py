"""``@job``: declare a function as a job and enqueue it.

The naming follows Django's own task framework (``django.tasks``):
``my_job.enqueue(...)`` and ``my_job.using(queue_name=..., priority=...,
run_after=...)``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Unpack, cast, overload

from django_jobretry.conf.task_options import TaskKeywords, TaskOptions
from django_jobretry.conf.uniqueness import NOT_UNIQUE, OnConflict, Uniqueness
from django_jobretry.exceptions import InvalidJob
from django_jobretry.limits import declare_task
from django_jobretry.policy import RetryPolicy
from django_jobretry.registry import registry
from django_jobretry.schedules import InvalidSchedule, ScheduleSpec, declare, job_schedule
from django_jobretry.signatures import check_call
from django_jobretry.validation import (
    check_priority,
    check_queue_name,
    check_task_name,
    check_timeout,
)

if TYPE_CHECKING:
    from django_jobretry.jobs.enqueue import JobSpec
    from django_jobretry.models import Job


@dataclasses.dataclass(frozen=True)
class JobDefinition[**P]:
    """A registered job function plus the options its enqueues use."""

    func: Callable[P, Any]
    name: str
    queue_name: str = "default"
    policy: str | RetryPolicy = "default"
    priority: int = 0
    run_after: datetime | timedelta | None = None
    #: How enqueues are deduplicated: ``@job(unique_args=..., unique_for=..., on_conflict=...)``
    #: and ``.using(unique_key=...)`` (conf/uniqueness.py); the default deduplicates nothing.
    unique: Uniqueness = NOT_UNIQUE
    #: How long one attempt may run before it ends as a "timeout" failure;
    #: None: the policy's ``timeout``, if any (docs/worker.md#time-limits).
    timeout: timedelta | None = None
    #: Whether ``func``'s first parameter is django.tasks' context, which the worker passes:
    #: the arguments of an enqueue bind to the parameters after it.
    takes_context: bool = False
    #: Whether what ``func`` returns is stored on the job, for ``job.result()`` (docs/results.md);
    #: None: as its policy's ``keep_result`` says.
    keep_result: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout", check_timeout(self.timeout))
        check_task_name(self.name)
        check_queue_name(self.queue_name)
        check_priority(self.priority)
        if not isinstance(self.unique, Uniqueness):
            raise InvalidJob(f"unique {self.unique!r} is invalid: a Uniqueness (use @job's unique_* options)")
        if not isinstance(self.policy, str | RetryPolicy):
            raise InvalidJob(f"policy {self.policy!r} is invalid: a JOBRETRY policy name or a RetryPolicy")
        if self.run_after is not None and not isinstance(self.run_after, datetime | timedelta):
            raise InvalidJob(f"run_after {self.run_after!r} is invalid: a datetime, a timedelta or None")
        if isinstance(self.run_after, datetime) and self.run_after.tzinfo is None:
            raise InvalidJob(f"run_after {self.run_after!r} is a naive datetime; pass an aware one")
        if self.keep_result is not None and not isinstance(self.keep_result, bool):
            raise InvalidJob(
                f"keep_result {self.keep_result!r} of task {self.name!r} is invalid: True, False, "
                "or None for its policy's"
            )

    @property
    def unique_key(self) -> str | None:
        """The fixed key its enqueues take (``.using(unique_key=...)``), if any."""
        return self.unique.key

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Run the function directly, in this process, without a job."""
        return self.func(*args, **kwargs)

    def using(
        self,
        *,
        queue_name: str | None = None,
        priority: int | None = None,
        run_after: datetime | timedelta | None = None,
        unique_key: str | None = None,
        unique_for: float | timedelta | None = None,
        on_conflict: OnConflict | None = None,
        policy: str | None = None,
    ) -> JobDefinition[P]:
        """A copy with some enqueue options changed; the original is untouched.

        ``unique_key`` wins over the task's ``unique_args``; ``unique_for`` and
        ``on_conflict`` replace the task's (docs/jobs.md#deduplication).

        ``policy`` here must be a name from JOBRETRY["POLICIES"]: workers find
        a job's policy by the name stored on it, and an inline RetryPolicy
        can only be found through the @job that registered it.
        """
        if policy is not None and not isinstance(policy, str):
            raise InvalidJob(
                f"using(policy={policy!r}) takes a policy name from JOBRETRY['POLICIES']; "
                "pass a RetryPolicy to @job(policy=...) instead"
            )
        unique = self.unique
        if unique_key is not None or unique_for is not None or on_conflict is not None:
            unique = Uniqueness.declare(
                "",  # as using()'s other options: the error names the option and the value
                unique_key=unique.key if unique_key is None else unique_key,
                unique_args=unique.args,
                unique_for=unique.window if unique_for is None else unique_for,
                on_conflict=unique.on_conflict if on_conflict is None else on_conflict,
            )
        changes: dict[str, Any] = {
            "queue_name": queue_name,
            "priority": priority,
            "run_after": run_after,
            "policy": policy,
        }
        return dataclasses.replace(self, unique=unique, **{k: v for k, v in changes.items() if v is not None})

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Store a job that runs ``func(*args, **kwargs)``; returns its row.

        Arguments ``func`` cannot take (``inspect.signature(func).bind``) or
        that are not JSON raise :class:`~django_jobretry.exceptions.InvalidArguments`
        and store nothing. Inside ``transaction.atomic()`` the job exists only if the transaction
        commits, and workers are woken when it does.
        """
        from django_jobretry.jobs.enqueue import enqueue

        return enqueue(self.spec, args, kwargs)

    def bulk_enqueue(self, calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]]) -> list[Job]:
        """Store many jobs of this task in one INSERT; each call is ``(args, kwargs)``.

        Every call is checked first: one that ``func`` cannot take stores none of them.
        """
        from django_jobretry.jobs.enqueue import bulk_enqueue

        return bulk_enqueue(self.spec, calls)

    @functools.cached_property
    def spec(self) -> JobSpec:
        """This definition as the enqueue service takes it (built once per definition)."""
        from django_jobretry.jobs.enqueue import JobSpec

        return JobSpec(
            name=self.name,
            func=self.func,
            queue_name=self.queue_name,
            policy=self.policy,
            priority=self.priority,
            run_after=self.run_after,
            unique=self.unique,
            takes_context=self.takes_context,
        )


#: The keywords of ``@job`` that tune its schedule, beside ``schedule``, ``every`` and ``tz``.
SCHEDULE_OPTIONS = ("overlap", "catch_up", "catch_up_limit", "retry_until_next_slot")


class JobKeywords(TaskKeywords, total=False):
    """``@job``'s keywords: the options both faces take (conf/task_options.py), its own, its schedule's."""

    name: str | None
    queue_name: str
    policy: str | RetryPolicy
    priority: int
    keep_result: bool | None
    schedule: str | None
    every: float | timedelta | None
    tz: str | None
    overlap: str
    catch_up: str
    catch_up_limit: int
    retry_until_next_slot: bool


@overload
def job[**P](func: Callable[P, Any], /) -> JobDefinition[P]: ...


@overload
def job[**P](**options: Unpack[JobKeywords]) -> Callable[[Callable[P, Any]], JobDefinition[P]]: ...


def job[**P](
    func: Callable[P, Any] | None = None, /, **options: Unpack[JobKeywords]
) -> JobDefinition[P] | Callable[[Callable[P, Any]], JobDefinition[P]]:
    """Declare a job: ``@job`` or ``@job(name=..., queue_name=..., policy=..., priority=..., timeout=...)``.

    ``name`` defaults to the function's dotted path; it is what is stored on
    each job and looked up by workers, so keep it stable across deploys.
    ``timeout`` (seconds or a timedelta) limits one attempt; it wins over the
    policy's ``timeout``. ``keep_result=True`` stores what the function
    returns, as JSON, for ``job.result()``; it too wins over the policy's
    (docs/results.md).

    ``concurrency`` (with ``concurrency_key``, per key), ``rate`` and
    ``burst`` limit how many of its jobs run at once and start per period,
    across every worker (docs/limits.md).

    ``unique_args`` (argument names: their values make the job's key),
    ``unique_for`` (how long the key stays taken after the job succeeded) and
    ``on_conflict`` (``"return_existing"``, ``"raise"`` or ``"replace"``)
    deduplicate its enqueues (docs/jobs.md#deduplication).

    ``schedule`` (a cron expression, read in ``tz``, UTC by default) or
    ``every`` (seconds or a timedelta) also runs the job periodically, with
    no arguments, under the schedule named like the task; ``overlap``,
    ``catch_up``, ``catch_up_limit`` and ``retry_until_next_slot`` tune it
    (docs/schedules.md).
    """
    unknown = sorted(set(options) - set(JobKeywords.__annotations__))
    if unknown:
        raise TypeError(
            f"job() got an unexpected keyword argument {unknown[0]!r}; "
            f"its schedule options are {', '.join(SCHEDULE_OPTIONS)}"
        )

    def decorate(function: Callable[P, Any]) -> JobDefinition[P]:
        return _declare(function, options)

    return decorate if func is None else decorate(func)


def _declare[**P](function: Callable[P, Any], options: JobKeywords) -> JobDefinition[P]:
    """``@job``'s options checked, then the task registered; a refused ``@job`` leaves nothing behind."""
    given: Mapping[str, Any] = options
    name = options.get("name") or f"{function.__module__}.{function.__qualname__}"
    shared = cast("TaskKeywords", {key: given[key] for key in TaskKeywords.__annotations__ if key in given})
    declared = TaskOptions(**shared).declare(f"@job {name}", function)
    own = {key: given[key] for key in ("queue_name", "policy", "priority", "keep_result") if key in given}
    definition = JobDefinition(function, name, unique=declared.unique, timeout=declared.timeout, **own)
    spec = _schedule(definition, given)
    registry.register(definition)
    declare_task(definition.name, declared.limit)
    if spec is not None:
        declare(spec)
    return definition


def _schedule(definition: JobDefinition[Any], options: Mapping[str, Any]) -> ScheduleSpec | None:
    """The job's own schedule (``@job(schedule=..., every=..., tz=..., overlap=...)``), checked; or None."""
    cadence = {"cron": options.get("schedule"), "every": options.get("every"), "tz": options.get("tz")}
    tuning = {key: options[key] for key in SCHEDULE_OPTIONS if key in options}
    if all(value is None for value in cadence.values()) and not tuning:
        return None
    spec = job_schedule(definition.name, **cadence, **tuning)
    try:
        check_call(definition.name, definition.func, (), {}, takes_context=False)
    except InvalidJob as exc:
        given = cadence["cron"] or cadence["every"]
        raise InvalidSchedule(
            definition.name, "schedule", given, f"a call with no arguments ({exc})"
        ) from None
    return spec
