"""System checks of the declared limits (E050-E051): a limit that cannot be enforced is refused at deploy.

E050: ``JOBRETRY["QUEUE_LIMITS"]`` is not a dict of queue name -> limit, or
an entry is invalid (each reported). E051: a task's ``concurrency_key``
names an argument its function does not take, so no enqueue could fill it
in (``@job`` refuses this at import; a task declared another way is caught here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import CheckMessage, Error, register

from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.limits import (
    QUEUE_FIELDS,
    QUEUE_SETTING,
    from_mapping,
    task_limits,
    unknown_key_arguments,
)
from django_jobretry.policy.limits import InvalidLimit
from django_jobretry.registry import registry

EXAMPLE = f'e.g. {QUEUE_SETTING} = {{"partner": {{"concurrency": 5, "rate": "100/m"}}}}'


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
