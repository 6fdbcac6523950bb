"""System checks for JOBRETRY: `manage.py check` names the bad key and value.

Ids are stable (documented in docs/settings.md); never renumber them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.urls import URLPattern, URLResolver, get_resolver

# Imported to register their checks: PostgreSQL (E013); LISTEN and pooling (E012, W002, W003);
# the modules workers import (E014, E015, E025); the limits (E050, E051); the schedules (E040-E043).
from django_jobretry import limits  # noqa: F401
from django_jobretry.conf import (  # noqa: F401
    HEARTBEATS_PER_LEASE,
    database_engine,
    databases,
    jobretry_settings,
    task_modules,
)
from django_jobretry.conf.schema import validate
from django_jobretry.display import did_you_mean
from django_jobretry.registry import registry
from django_jobretry.schedules import checks as schedule_checks  # noqa: F401


@register()
def check_settings(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """Report every problem in settings.JOBRETRY, each with its own id and hint."""
    _, problems = validate(jobretry_settings.raw)
    return [Error(p.msg, hint=p.hint, id=f"django_jobretry.{p.id}") for p in problems]


@register()
def check_heartbeat(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """Warn when HEARTBEAT_SECONDS is too long for the lease: the worker would cap it silently."""
    raw = jobretry_settings.raw
    if validate(raw)[1] or not isinstance(raw, dict) or raw.get("HEARTBEAT_SECONDS") is None:
        return []
    lease, heartbeat = jobretry_settings.lease_seconds, float(raw["HEARTBEAT_SECONDS"])
    every = jobretry_settings.heartbeat_every(lease)
    if heartbeat <= every:
        return []
    return [
        Warning(
            f'JOBRETRY["HEARTBEAT_SECONDS"] = {raw["HEARTBEAT_SECONDS"]!r} is more than a third of '
            f"LEASE_SECONDS ({lease:g}); workers beat every {every:g} s instead, so two heartbeats "
            "can fail before a lease expires.",
            hint=f"Set HEARTBEAT_SECONDS to at most LEASE_SECONDS / {HEARTBEATS_PER_LEASE}, "
            "or leave it unset (None).",
            id="django_jobretry.W001",
        )
    ]


@register()
def check_job_policies(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """A registered task naming a policy JOBRETRY does not have would fail only at enqueue time."""
    policies, problems = validate(jobretry_settings.raw)
    if problems:  # the settings check reports those; policy names are not reliable yet
        return []
    errors: list[CheckMessage] = []
    for name in registry.names():
        definition = registry.get(name)
        policy = definition.policy if definition is not None else None
        if isinstance(policy, str) and policy not in policies:
            errors.append(
                Error(
                    f'task {name!r} uses the policy {policy!r}, which JOBRETRY["POLICIES"] does not '
                    f"define.{did_you_mean([policy], policies)}",
                    hint=f"Define it in JOBRETRY['POLICIES'] or use one of {sorted(policies)}.",
                    id="django_jobretry.E009",
                )
            )
    return errors


#: The module of the optional metrics view (its package); named, not imported (an adapter, layers above).
METRICS_VIEW_MODULE = "django_jobretry.metrics"


def _views(patterns: Iterable[URLPattern | URLResolver]) -> Iterable[Any]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _views(pattern.url_patterns)
        else:
            yield pattern.callback


@register(Tags.urls)
def check_metrics_view(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """The metrics view imports prometheus_client only when called: say it is missing before a scrape."""
    if importlib.util.find_spec("prometheus_client") is not None:
        return []
    # A worker-only project has no URL configuration: get_resolver() would raise in every command.
    if not getattr(settings, "ROOT_URLCONF", None):
        return []
    views = _views(get_resolver().url_patterns)
    if not any(getattr(view, "__module__", "") == METRICS_VIEW_MODULE for view in views):
        return []
    return [
        Error(
            "The URL configuration includes the django-jobretry metrics view, but prometheus_client "
            "is not installed.",
            hint="pip install 'django-jobretry[prometheus]' (or prometheus_client), or remove the URL.",
            id="django_jobretry.E011",
        )
    ]
