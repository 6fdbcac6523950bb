"""Checks that every task the web process can enqueue is one a worker has (E014, E015, E025).

A worker runs only the tasks its start-up imports register
(task_modules.py). These checks say, before the first job dies as
"unknown task", which module start-up could not import and which task is
defined in a module start-up never imports.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, register
from django.urls import get_resolver

from django_jobretry.conf import task_modules
from django_jobretry.conf.schema import TASK_MODULES_EXAMPLE
from django_jobretry.registry import registry


@register()
def check_startup_imports(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """E014: a TASK_MODULES entry that does not import; E025: a @task Django refused while it loaded."""
    problems: list[CheckMessage] = []
    refused = task_modules.refused_task_types()
    for path, error in task_modules.failures().items():
        if isinstance(error, refused):
            problems.append(
                Error(
                    f"{path} was not imported at start-up, so none of its tasks is registered: {error}",
                    hint=getattr(error, "hint", "Fix the @task that Django refused."),
                    id="django_jobretry.E025",
                )
            )
        else:
            problems.append(
                Error(
                    f'JOBRETRY["TASK_MODULES"]: {path!r} cannot be imported '
                    f"({type(error).__name__}: {error}), so none of its tasks is registered.",
                    hint=f"Give the dotted path of a module that imports; {TASK_MODULES_EXAMPLE}.",
                    id="django_jobretry.E014",
                )
            )
    return problems


@register()
def check_tasks_workers_import(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """E015: a task registered after start-up, in a module that workers therefore do not import."""
    _import_url_configuration()
    return [
        Error(
            f"task {name!r} is defined in {module!r}, which workers do not import at start-up "
            f"(they import {task_modules.listing()}): they will not have it, and every job of it "
            "fails as an unknown task.",
            hint=f"{task_modules.HOW_TO_ADD[:1].upper()}{task_modules.HOW_TO_ADD[1:]}.",
            id="django_jobretry.E015",
        )
        for name, module in sorted(registry.registered_late().items())
    ]


def _import_url_configuration() -> None:
    """Load the URL configuration, as the web process does: a task in a view is then registered.

    The order of checks is not defined, so this check does not rely on
    Django's URL check having loaded it first. A URL configuration that
    cannot be loaded is Django's check to report.
    """
    if not getattr(settings, "ROOT_URLCONF", None):
        return  # a worker-only project
    with contextlib.suppress(Exception):  # Django's urls checks report it (urls.E004 and others)
        _ = get_resolver().url_patterns
