"""Periodic schedules, in one folder: declared in code and settings, run by every worker, with no leader.

This module is where a schedule is declared (layer 2): on a ``@job``, in
``JOBRETRY["SCHEDULES"]``, in a task backend's OPTIONS. Three front doors,
one value: each declaration becomes a :class:`ScheduleSpec`. ``@job(schedule=...)``
and the django.tasks backend call :func:`declare` when they are imported;
the settings are read when asked, so an ``override_settings`` takes effect at
once. Workers run the schedules :func:`declared` returns, and the job a
declaration's runs are (:func:`run_columns`) is here too, so that the
workers' look and check E043 ask one function whether a schedule can make a
run, and get one answer. The rest of the folder:

- ``checks``: `manage.py check` on the declarations, E040-E043 (layer 2),
  naming each declaration that cannot run;
- ``rows``: every statement on a schedule's row, and each write besides a
  look's: declaring, a run's success, an operator's pause, resume, run now;
- ``runs``: a look, turning due slots into runs, and the heartbeat duty
  whose thread looks (layer 4: it is the worker's);
- ``status``: where each schedule stands, and its metrics;
- ``admin``, ``admin_actions``, ``cli``: the admin page and its actions,
  the dashboard's panel, `manage.py schedules` and `jobstatus`' section.

The Schedule model stays with the others (models/schedule.py); features.py
names the parts each face uses. docs/decisions/0007 says why no leader.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings

from django_jobretry.conf import jobretry_settings
from django_jobretry.display import did_you_mean
from django_jobretry.exceptions import InvalidJob
from django_jobretry.policy import InvalidPolicy
from django_jobretry.policy.slots import (
    DEFAULT_CATCH_UP_LIMIT,
    DESCRIBED_MAX_LENGTH,
    Cadence,
    CatchUp,
    Overlap,
)
from django_jobretry.registry import registry, resolve_policy
from django_jobretry.signatures import check_call
from django_jobretry.validation import check_queue_name, encode_arguments

#: The keys of one schedule's mapping, in settings and in a task backend's OPTIONS.
KEYS = (
    *("task", "cron", "every", "tz", "args", "kwargs", "queue"),
    *("overlap", "catch_up", "catch_up_limit", "retry_until_next_slot"),
)
#: The most runs one look may start for one schedule (``catch_up="all"``'s cap).
MAX_CATCH_UP_LIMIT = 1_000
SETTINGS_SOURCE = 'JOBRETRY["SCHEDULES"]'
#: The paths ``TASKS`` may name our django.tasks backend by.
TASK_BACKEND_PATHS = (
    "django_jobretry.backends.JobRetryBackend",
    "django_jobretry.contrib.django_tasks.backend.JobRetryBackend",
)


class InvalidSchedule(InvalidPolicy):
    """A schedule declaration is wrong: ``schedule`` names it, ``field`` the part that is."""

    def __init__(self, schedule: str, field: str, value: object, allowed: str) -> None:
        super().__init__(field, value, allowed)
        self.schedule = schedule
        self.args = (f"schedule {schedule!r}: {field}={value!r} is invalid: {allowed}",)


@dataclass(frozen=True)
class ScheduleSpec:
    """One declared schedule: what runs, when, and what happens to slots that cannot run on time."""

    name: str
    task_name: str
    cadence: Cadence
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: None: the task's own queue.
    queue_name: str | None = None
    overlap: Overlap = Overlap.SKIP
    catch_up: CatchUp = CatchUp.LATEST
    catch_up_limit: int = DEFAULT_CATCH_UP_LIMIT
    #: A run's retries stop before the schedule's next slot, so runs never overlap through retries.
    retry_until_next_slot: bool = True
    #: Where it was declared, for messages: "@job", 'JOBRETRY["SCHEDULES"]', 'TASKS["default"]'.
    source: str = "@job"


#: Declared in code, by name: ``@job(schedule=...)`` and task backends' OPTIONS.
_declared: dict[str, ScheduleSpec] = {}
#: Names declared twice in code with different values: check E041 reports them.
conflicts: dict[str, list[str]] = {}


def declare(spec: ScheduleSpec) -> None:
    """Remember a schedule declared in code; the same name declared again differently is a conflict."""
    earlier = _declared.get(spec.name)
    if earlier is not None and earlier != spec:
        conflicts.setdefault(spec.name, [earlier.source]).append(spec.source)
    _declared[spec.name] = spec


def declared() -> dict[str, ScheduleSpec]:
    """Every schedule of this process, by name; the declarations that are wrong are left out (checked)."""
    specs = dict(_declared)
    for source, mappings in (*task_backend_mappings().items(), (SETTINGS_SOURCE, settings_mappings())):
        for name, mapping in mappings.items():
            try:
                specs[name] = from_mapping(name, mapping, source)
            except InvalidSchedule:
                continue
    return specs


def task_backend_mappings() -> dict[str, dict[str, Any]]:
    """Each JobRetryBackend's ``OPTIONS["schedules"]`` in ``TASKS``, by where it is declared.

    Read from the settings, not from the backend object: Django creates a
    task backend only when a task or a caller first asks for it, and a worker
    must run these schedules even when no ``@task`` is imported.
    """
    found: dict[str, dict[str, Any]] = {}
    configured = getattr(settings, "TASKS", {})
    for alias, backend in configured.items() if isinstance(configured, Mapping) else ():
        if not isinstance(backend, Mapping) or backend.get("BACKEND") not in TASK_BACKEND_PATHS:
            continue
        options = backend.get("OPTIONS", {})
        mappings = options.get("schedules", {}) if isinstance(options, Mapping) else {}
        if isinstance(mappings, Mapping):
            found[f'TASKS["{alias}"]["OPTIONS"]["schedules"]'] = dict(mappings)
    return found


def settings_mappings() -> dict[str, Any]:
    """``JOBRETRY["SCHEDULES"]`` as configured ({} when absent or not a dict, which E040 reports)."""
    raw = jobretry_settings.raw
    configured = raw.get("SCHEDULES", {}) if isinstance(raw, Mapping) else {}
    return dict(configured) if isinstance(configured, Mapping) else {}


def cadence_of(schedule: str, *, cron: object = None, every: object = None, tz: object = None) -> Cadence:
    """The cadence of ``schedule``: a cron expression (in ``tz``) or an interval (seconds or timedelta)."""
    if (cron is None) == (every is None):
        raise InvalidSchedule(schedule, "cron", cron, "give exactly one of cron (with tz) and every")
    if every is not None and tz is not None:
        raise InvalidSchedule(schedule, "tz", tz, "only for cron: an interval is the same in every zone")
    if isinstance(every, int | float) and not isinstance(every, bool):
        every = timedelta(seconds=every)
    if cron is not None and not isinstance(cron, str):
        raise InvalidSchedule(schedule, "cron", cron, "a cron expression as a string, e.g. '0 3 * * *'")
    try:
        cadence = Cadence(cron=cron, tz="UTC" if tz is None else str(tz), every=every)  # type: ignore[arg-type]
    except InvalidPolicy as exc:
        close = did_you_mean([str(exc.value)], zoneinfo.available_timezones()) if exc.field == "tz" else ""
        raise InvalidSchedule(schedule, exc.field, exc.value, exc.allowed + close) from None
    if cron is not None and (over := len(cadence.describe()) - DESCRIBED_MAX_LENGTH) > 0:
        # The row stores the cadence, with its zone, to tell a changed one: no worker could declare this.
        raise InvalidSchedule(
            schedule,
            "cron",
            cron,
            f"at most {len(cron) - over} characters in time zone {cadence.tz!r} (what a schedule's row "
            f"stores), got {len(cron)}: write a field listing every value as '*', and runs of values "
            "as 'a-b' or 'a-b/n'",
        )
    return cadence


def from_mapping(name: object, mapping: object, source: str) -> ScheduleSpec:
    """One schedule of a settings mapping, validated; InvalidSchedule names the schedule and the key."""
    if not isinstance(name, str) or not name or len(name) > 200:
        raise InvalidSchedule(str(name), "name", name, "a non-empty string of at most 200 characters")
    if not isinstance(mapping, Mapping):
        raise InvalidSchedule(
            name, "schedule", mapping, 'a dict, e.g. {"task": "app.jobs.f", "cron": "0 3 * * *"}'
        )
    for key in mapping:
        if key not in KEYS:
            raise InvalidSchedule(
                name, str(key), mapping[key], f"not a key.{did_you_mean([key], KEYS)} Keys: {', '.join(KEYS)}"
            )
    task = mapping.get("task")
    if not isinstance(task, str) or not task:
        raise InvalidSchedule(name, "task", task, "the registered name of a task, e.g. 'reports.jobs.build'")
    cadence = cadence_of(name, cron=mapping.get("cron"), every=mapping.get("every"), tz=mapping.get("tz"))
    args, kwargs = mapping.get("args", ()), mapping.get("kwargs", {})
    if not isinstance(args, list | tuple):
        raise InvalidSchedule(name, "args", args, "a list")
    if not isinstance(kwargs, Mapping) or not all(isinstance(key, str) for key in kwargs):
        raise InvalidSchedule(name, "kwargs", kwargs, "a dict with string keys")
    queue = mapping.get("queue")
    if queue is not None and not isinstance(queue, str):
        raise InvalidSchedule(name, "queue", queue, "a queue name, or None for the task's own")
    return ScheduleSpec(
        name=name,
        task_name=task,
        cadence=cadence,
        args=tuple(args),
        kwargs=dict(kwargs),
        queue_name=queue,
        source=source,
        **options(name, mapping),
    )


def job_schedule(task_name: str, *, cron: object, every: object, tz: object, **chosen: Any) -> ScheduleSpec:
    """``@job(schedule=..., every=..., tz=...)``: the job's own schedule, named after the task.

    Its runs take no arguments. Raises InvalidSchedule at decoration, so a
    typo fails the import that declares it; the decorator then declares it.
    """
    cadence = cadence_of(task_name, cron=cron, every=every, tz=tz)
    return ScheduleSpec(name=task_name, task_name=task_name, cadence=cadence, **options(task_name, chosen))


def options(name: str, mapping: Mapping[str, Any]) -> dict[str, Any]:
    """The overlap and catch-up options of a declaration, validated (also for ``@job``'s keywords)."""
    found: dict[str, Any] = {}
    for key, kind in (("overlap", Overlap), ("catch_up", CatchUp)):
        if key in mapping:
            try:
                found[key] = kind(mapping[key])
            except ValueError:
                allowed = ", ".join(repr(member.value) for member in kind)
                raise InvalidSchedule(name, key, mapping[key], f"one of {allowed}") from None
    limit = mapping.get("catch_up_limit", DEFAULT_CATCH_UP_LIMIT)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_CATCH_UP_LIMIT:
        raise InvalidSchedule(name, "catch_up_limit", limit, f"an integer from 1 to {MAX_CATCH_UP_LIMIT}")
    found["catch_up_limit"] = limit
    until = mapping.get("retry_until_next_slot", True)
    if not isinstance(until, bool):
        raise InvalidSchedule(name, "retry_until_next_slot", until, "True or False")
    found["retry_until_next_slot"] = until
    return found


# -- the job a schedule's run is, as its task is declared in this process: built once per look --


def overlap_key(name: str) -> str:
    """The unique key every run of ``name`` holds while live, under overlap "skip" and "queue"."""
    return f"schedule:{name}"


@dataclass(frozen=True)
class Run:
    """The columns of one schedule's runs, as its task is declared in this process now."""

    task: str
    queue: str
    policy: str
    priority: int
    max_attempts: int
    args: str
    kwargs: str
    #: The task's own deduplication key for these arguments, if it declares one; else the overlap key.
    key: str | None
    #: The task's ``unique_for``: a run is not inserted while a job with its key succeeded less ago.
    held_for: timedelta | None = None


def run_columns(spec: ScheduleSpec) -> Run:
    """The run of ``spec`` as a job; InvalidJob (or UnknownPolicy) when it cannot make one here.

    A task that deduplicates its enqueues (``unique_args``, ``unique_for``)
    deduplicates its runs too: they take its key for the schedule's arguments
    instead of the overlap key, so a live job of that key, or one that
    succeeded within the window, holds the slot back like a live run would.

    Its task is unknown in this process, refuses the arguments, names a queue
    enqueue would refuse, or its policy is not in the settings.
    """
    definition = registry.get(spec.task_name)
    if definition is None:
        raise InvalidJob(f"task {spec.task_name!r} is not registered in this process")
    arguments = encode_arguments(
        spec.task_name,
        spec.args,
        dict(spec.kwargs),
        max_bytes=jobretry_settings.max_args_bytes,
        max_depth=jobretry_settings.max_args_depth,
    )
    check_call(
        spec.task_name, definition.func, spec.args, dict(spec.kwargs), takes_context=definition.takes_context
    )
    policy_name, policy = resolve_policy(definition.policy)
    queue = spec.queue_name or definition.queue_name
    check_queue_name(queue)
    unique = definition.unique
    key = unique.key_for(
        spec.task_name, definition.func, spec.args, dict(spec.kwargs), takes_context=definition.takes_context
    )
    return Run(
        task=spec.task_name,
        queue=queue,
        policy=policy_name,
        priority=definition.priority,
        max_attempts=policy.max_attempts,
        args=arguments.args_json,
        kwargs=arguments.kwargs_json,
        key=key or (None if spec.overlap is Overlap.ALLOW else overlap_key(spec.name)),
        held_for=unique.window if key else None,
    )
