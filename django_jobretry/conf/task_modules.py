"""The modules every process imports at start-up: what a worker can run is what they register.

A worker never imports a path read from a row (docs/design.md#rule-10): it
runs the tasks registered while Django starts. Those are the ``@job`` and
``@task`` functions of each installed app's ``jobs.py`` (and ``tasks.py``
when ``TASKS`` uses our backend), of ``JOBRETRY["TASK_MODULES"]``, and of
whatever those and the apps' own modules import. A task defined anywhere
else (a ``views.py``, a service module) exists in the web process only;
check E015 names it (below), and the worker's "unknown
task" error lists these modules.

A module that cannot be imported is remembered, not raised: a
``TASK_MODULES`` entry that does not import (E014), or a ``@task`` that
Django refuses while its module loads, such as a queue its backend's
``QUEUES`` does not list (E025). ``manage.py check`` - and so ``runworker``,
``runserver`` and ``migrate`` - reports them instead of every command
printing a traceback. Any other error in an app's own ``jobs.py`` or
``tasks.py`` is raised, as Django does for ``admin.py``.

The checks of this module's work sit beside it (E014, E015, E025): they
say, before the first job dies as "unknown task", which module start-up
could not import and which task is defined in a module start-up never
imports.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig, apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, register
from django.urls import get_resolver
from django.utils.module_loading import module_has_submodule

from django_jobretry.conf.schema import TASK_MODULES_EXAMPLE, task_modules
from django_jobretry.registry import registry

logger = logging.getLogger("django_jobretry")

#: How many module paths a message lists before it says "and N more".
SHOWN = 20

_imported: list[str] = []
_failures: dict[str, Exception] = {}


def refused_task_types() -> tuple[type[Exception], ...]:
    """Django's InvalidTask, raised by a ``@task`` its backend refuses; none before Django 6."""
    try:
        from django.tasks.exceptions import InvalidTask
    except ImportError:  # Django 5.2: no django.tasks
        return ()
    return (InvalidTask,)


def import_startup_modules(raw_settings: object, *, with_tasks: bool) -> None:
    """Import each app's jobs.py (and tasks.py), then JOBRETRY["TASK_MODULES"], remembering failures."""
    refused = refused_task_types()
    names = ("jobs", "tasks") if with_tasks else ("jobs",)
    for config in apps.get_app_configs():
        for name in names:
            if module_has_submodule(config.module, name):
                _import(f"{config.name}.{name}", refused)
    for path in task_modules(raw_settings):
        _import(path, (Exception,))


def _import(path: str, remembered: tuple[type[Exception], ...]) -> None:
    try:
        importlib.import_module(path)
    except remembered as error:
        _failures[path] = error
        logger.error(
            "start-up could not import %s (%s: %s); its tasks are not registered",
            path,
            type(error).__name__,
            error,
            extra={"task_module": path, "error_class": type(error).__name__, "outcome": "not_imported"},
        )
        return
    _failures.pop(path, None)
    if path not in _imported:
        _imported.append(path)


def imported() -> list[str]:
    """The start-up modules imported in this process, in import order."""
    return list(_imported)


def failures() -> dict[str, Exception]:
    """Start-up modules that could not be imported, and why."""
    return dict(_failures)


def listing() -> str:
    """The imported start-up modules for a message: at most SHOWN of them, then how many more."""
    shown = ", ".join(_imported[:SHOWN]) or "none"
    more = len(_imported) - SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


#: How to make workers import a task's module: the fix in every message about one they do not import.
HOW_TO_ADD = (
    "define the task in an installed app's jobs.py (or tasks.py, when TASKS uses JobRetryBackend), "
    'or add its module to JOBRETRY["TASK_MODULES"]'
)


@register()
def check_startup_imports(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """E014: a TASK_MODULES entry that does not import; E025: a @task Django refused while it loaded."""
    problems: list[CheckMessage] = []
    refused = refused_task_types()
    for path, error in failures().items():
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
            f"(they import {listing()}): they will not have it, and every job of it "
            "fails as an unknown task.",
            hint=f"{HOW_TO_ADD[:1].upper()}{HOW_TO_ADD[1:]}.",
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
