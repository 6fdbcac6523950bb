"""Limits: how many jobs of a task or queue run at once, and how fast they start.

This module is where limits are declared, what a job's row carries of them
(its lane), and their checks (layer 2, beside conf/); ``status`` shows every
declared limit now, running / limit and held, in `jobstatus`, the metrics and
the dashboard (layer 5). The claim that enforces them is the state machine's
(jobs/), and the pure values are policy/limits.py and policy/slots.py.

Tasks declare theirs through ``@job(concurrency=..., concurrency_key=...,
rate=...)`` (:func:`declare_task`); queues through ``JOBRETRY["QUEUE_LIMITS"]``,
parsed once per value of the setting (enqueue reads them for every job).

A limited job gets a **lane** at enqueue, stored in ``limit_lane``:
``key:<its concurrency key>`` when its task declares a ``concurrency_key``,
else ``task:<name>`` when its task is limited, else ``queue:<name>``. The
ordinary claim never takes a job with a lane; the limited claim
(jobs/statements.py) serves lanes in turn, so one busy key cannot
starve the others. A job enqueued before its limit was declared has no
lane and runs unlimited (docs/limits.md).

A limit that cannot be enforced is refused at deploy by the system checks
below, registered when conf/checks.py imports this module: E050,
``JOBRETRY["QUEUE_LIMITS"]`` is not a dict of queue name -> limit, or an
entry is invalid (each reported); E051, a task's ``concurrency_key`` names
an argument its function does not take, so no enqueue could fill it in
(``@job`` refuses this at import; a task declared another way is caught here).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import CheckMessage, Error, register
from django.core.signals import setting_changed
from django.dispatch import receiver

from django_jobretry.conf import jobretry_settings
from django_jobretry.policy.limits import InvalidLimit, Limit, fill_key, key_fields
from django_jobretry.registry import registry
from django_jobretry.signatures import bound_arguments, untaken

#: Where queue limits are declared, as errors name it.
QUEUE_SETTING = 'JOBRETRY["QUEUE_LIMITS"]'
QUEUE_FIELDS = ("concurrency", "rate", "burst")
EXAMPLE = f'e.g. {QUEUE_SETTING} = {{"partner": {{"concurrency": 5, "rate": "100/m"}}}}'

_tasks: dict[str, Limit] = {}
_lock = threading.Lock()


def declare_task(task_name: str, limit: Limit | None) -> None:
    """Record (or, with None, forget) the limit of ``task_name``; the latest declaration wins."""
    with _lock:
        if limit is None:
            _tasks.pop(task_name, None)
        else:
            _tasks[task_name] = limit


def declare_limit(
    where: str, func: Callable[..., Any], *, takes_context: bool = False, **options: Any
) -> Limit | None:
    """A task's limit options checked (``Limit.declare``), its key template against ``func``; None: no limit.

    InvalidLimit names ``where``, the option and the value, or the argument the key names that
    ``func`` does not take: what ``@job`` and a django.tasks ``@task`` refuse at import.
    """
    limit = Limit.declare(where, **options)
    if limit is not None and (unknown := unknown_key_arguments(limit, func, takes_context=takes_context)):
        name = getattr(func, "__name__", "the task function")
        raise InvalidLimit(
            f"{where}: concurrency_key {limit.concurrency_key!r} names {unknown[0]!r}, "
            f"which {name}() does not take"
        )
    return limit


def task_limits() -> dict[str, Limit]:
    return dict(_tasks)


def from_mapping(where: str, mapping: object, fields: tuple[str, ...]) -> Limit | None:
    """A limit from a settings or OPTIONS dict, or InvalidLimit naming the unknown field."""
    if not isinstance(mapping, Mapping):
        got = type(mapping).__name__
        raise InvalidLimit(f"{where} must be a dict with any of {', '.join(fields)}, got {got}")
    unknown = sorted(str(key) for key in mapping if key not in fields)
    if unknown:
        raise InvalidLimit(f"{where} has unknown field {unknown[0]!r}; allowed: {', '.join(fields)}")
    return Limit.declare(where, **{str(key): value for key, value in mapping.items()})


def queue_limits() -> dict[str, Limit]:
    """JOBRETRY["QUEUE_LIMITS"] by queue name; InvalidLimit for the first bad entry (check E050 lists all)."""
    return dict(_queue_limits())


@functools.cache
def _queue_limits() -> dict[str, Limit]:
    raw = jobretry_settings.raw
    configured = raw.get("QUEUE_LIMITS", {}) if isinstance(raw, Mapping) else {}
    if not isinstance(configured, Mapping):
        got = type(configured).__name__
        raise InvalidLimit(f"{QUEUE_SETTING} must be a dict of queue name -> dict, got {got}")
    limits = {}
    for queue, mapping in configured.items():
        limit = from_mapping(f"{QUEUE_SETTING}[{queue!r}]", mapping, QUEUE_FIELDS)
        if limit is not None:
            limits[str(queue)] = limit
    return limits


@receiver(setting_changed)
def _forget_queue_limits(*, setting: str, **kwargs: object) -> None:
    if setting == "JOBRETRY":
        _queue_limits.cache_clear()


def lane(
    task_name: str,
    queue_name: str,
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    takes_context: bool = False,
) -> str | None:
    """The lane a new job of ``task_name`` in ``queue_name`` gets, or None when no limit applies.

    ``args``/``kwargs`` are the call's, already checked against ``func``
    (checked_arguments); a key is filled in from them with defaults applied.
    """
    limit = _tasks.get(task_name)
    if limit is not None and limit.concurrency_key is not None:
        arguments = bound_arguments(func, args, kwargs, takes_context=takes_context)
        return f"key:{fill_key(limit.concurrency_key, arguments)}"
    if limit is not None:
        return f"task:{task_name}"
    if queue_name in _queue_limits():
        return f"queue:{queue_name}"
    return None


def unknown_key_arguments(limit: Limit, func: Callable[..., Any], *, takes_context: bool) -> list[str]:
    """The names a concurrency_key template uses that ``func`` does not take (check E051)."""
    if limit.concurrency_key is None:
        return []
    return untaken(func, key_fields("concurrency_key", limit.concurrency_key), takes_context=takes_context)


def claim_limits() -> dict[str, Any] | None:
    """The declared limits as the limited claim takes them (jsonb), or None when none is declared.

    ``{"tasks": {name: entry}, "queues": {name: entry}}``, each entry
    ``{"c": concurrency or null, "k": keyed, "r": tokens per second or null, "b": burst}``.
    """
    tasks, queues = task_limits(), queue_limits()
    if not tasks and not queues:
        return None
    return {
        "tasks": {name: _entry(limit) for name, limit in tasks.items()},
        "queues": {name: _entry(limit) for name, limit in queues.items()},
    }


def _entry(limit: Limit) -> dict[str, Any]:
    rate = limit.rate
    return {
        "c": limit.concurrency,
        "k": limit.concurrency_key is not None,
        "r": None if rate is None else rate.per_second,
        "b": None if rate is None else rate.burst,
    }


# -- system checks ----------------------------------------------------------------------------------
@register()
def check_queue_limits(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """E050: each invalid queue limit, with the field, the value and what is allowed."""
    raw = jobretry_settings.raw
    if not isinstance(raw, Mapping) or "QUEUE_LIMITS" not in raw:
        return []
    configured = raw["QUEUE_LIMITS"]
    if not isinstance(configured, Mapping):
        got = type(configured).__name__
        return [
            Error(
                f"{QUEUE_SETTING} must be a dict of queue name -> dict, got {got}.",
                hint=EXAMPLE,
                id="django_jobretry.E050",
            )
        ]
    errors: list[CheckMessage] = []
    for queue, mapping in configured.items():
        try:
            from_mapping(f"{QUEUE_SETTING}[{queue!r}]", mapping, QUEUE_FIELDS)
        except InvalidLimit as exc:
            errors.append(Error(f"{exc}.", hint=EXAMPLE, id="django_jobretry.E050"))
    return errors


@register()
def check_task_limit_keys(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """E051: a concurrency_key naming an argument the task's function does not take."""
    errors: list[CheckMessage] = []
    for name, limit in sorted(task_limits().items()):
        definition = registry.get(name)
        if definition is None:
            continue
        unknown = unknown_key_arguments(limit, definition.func, takes_context=definition.takes_context)
        if unknown:
            errors.append(
                Error(
                    f"task {name!r}: concurrency_key {limit.concurrency_key!r} names {unknown[0]!r}, "
                    f"which {definition.func.__name__}() does not take.",
                    hint="Name the function's own parameters in the template, e.g. 'tenant:{tenant_id}'.",
                    id="django_jobretry.E051",
                )
            )
    return errors
