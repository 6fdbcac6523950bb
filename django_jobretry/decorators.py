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
from typing import TYPE_CHECKING, Any, overload

from django_jobretry.conf.limits import declare_limit, declare_task
from django_jobretry.conf.schedules import InvalidSchedule, declare, job_schedule
from django_jobretry.conf.uniqueness import NOT_UNIQUE, OnConflict, Uniqueness
from django_jobretry.exceptions import InvalidJob
from django_jobretry.policy import RetryPolicy
from django_jobretry.registry import registry
from django_jobretry.signatures import check_call
from django_jobretry.validation import (
    check_priority,
    check_queue_name,
    check_task_name,
    check_timeout,
)

if TYPE_CHECKING:
    from django_jobretry.models import Job
    from django_jobretry.services.enqueue import JobSpec


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
        from django_jobretry.services.enqueue import enqueue

        return enqueue(self.spec, args, kwargs)

    def bulk_enqueue(self, calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]]) -> list[Job]:
        """Store many jobs of this task in one INSERT; each call is ``(args, kwargs)``.

        Every call is checked first: one that ``func`` cannot take stores none of them.
        """
        from django_jobretry.services.enqueue import bulk_enqueue

        return bulk_enqueue(self.spec, calls)

    @functools.cached_property
    def spec(self) -> JobSpec:
        """This definition as the enqueue service takes it (built once per definition)."""
        from django_jobretry.services.enqueue import JobSpec

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


@overload
def job[**P](func: Callable[P, Any], /) -> JobDefinition[P]: ...


@overload
def job[**P](
    *,
    name: str | None = None,
    queue_name: str = "default",
    policy: str | RetryPolicy = "default",
    priority: int = 0,
    timeout: float | timedelta | None = None,
    concurrency: int | None = None,
    concurrency_key: str | None = None,
    rate: str | None = None,
    burst: int | None = None,
    unique_args: tuple[str, ...] = (),
    unique_for: float | timedelta | None = None,
    on_conflict: OnConflict = "return_existing",
    schedule: str | None = None,
    every: float | timedelta | None = None,
    tz: str | None = None,
    **schedule_options: Any,
) -> Callable[[Callable[P, Any]], JobDefinition[P]]: ...


def job[**P](
    func: Callable[P, Any] | None = None,
    /,
    *,
    name: str | None = None,
    queue_name: str = "default",
    policy: str | RetryPolicy = "default",
    priority: int = 0,
    timeout: float | timedelta | None = None,
    concurrency: int | None = None,
    concurrency_key: str | None = None,
    rate: str | None = None,
    burst: int | None = None,
    unique_args: tuple[str, ...] = (),
    unique_for: float | timedelta | None = None,
    on_conflict: OnConflict = "return_existing",
    schedule: str | None = None,
    every: float | timedelta | None = None,
    tz: str | None = None,
    **schedule_options: Any,
) -> JobDefinition[P] | Callable[[Callable[P, Any]], JobDefinition[P]]:
    """Declare a job: ``@job`` or ``@job(name=..., queue_name=..., policy=..., priority=..., timeout=...)``.

    ``name`` defaults to the function's dotted path; it is what is stored on
    each job and looked up by workers, so keep it stable across deploys.
    ``timeout`` (seconds or a timedelta) limits one attempt; it wins over the
    policy's ``timeout``.

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
    unknown = set(schedule_options) - set(SCHEDULE_OPTIONS)
    if unknown:
        raise TypeError(
            f"job() got an unexpected keyword argument {sorted(unknown)[0]!r}; "
            f"its schedule options are {', '.join(SCHEDULE_OPTIONS)}"
        )

    def decorate(function: Callable[P, Any]) -> JobDefinition[P]:
        task_name = name or f"{function.__module__}.{function.__qualname__}"
        where = f"@job {task_name}"
        unique = Uniqueness.declare(
            where, unique_args=unique_args, unique_for=unique_for, on_conflict=on_conflict, func=function
        )
        definition = JobDefinition(
            func=function,
            name=task_name,
            queue_name=queue_name,
            policy=policy,
            priority=priority,
            unique=unique,
            timeout=check_timeout(timeout),
        )
        limit = declare_limit(
            where, function, concurrency=concurrency, concurrency_key=concurrency_key, rate=rate, burst=burst
        )
        spec = None  # checked before the task is registered: a refused @job leaves nothing behind
        if schedule is not None or every is not None or tz is not None or schedule_options:
            spec = job_schedule(definition.name, cron=schedule, every=every, tz=tz, **schedule_options)
            try:
                check_call(definition.name, function, (), {}, takes_context=False)
            except InvalidJob as exc:
                raise InvalidSchedule(
                    definition.name, "schedule", schedule or every, f"a call with no arguments ({exc})"
                ) from None
        registry.register(definition)
        declare_task(definition.name, limit)
        if spec is not None:
            declare(spec)
        return definition

    return decorate if func is None else decorate(func)
