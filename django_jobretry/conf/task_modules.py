"""The modules every process imports at start-up: what a worker can run is what they register.

A worker never imports a path read from a row (docs/design.md#rule-10): it
runs the tasks registered while Django starts. Those are the ``@job`` and
``@task`` functions of each installed app's ``jobs.py`` (and ``tasks.py``
when ``TASKS`` uses our backend), of ``JOBRETRY["TASK_MODULES"]``, and of
whatever those and the apps' own modules import. A task defined anywhere
else (a ``views.py``, a service module) exists in the web process only;
check E015 names it (task_module_checks.py), and the worker's "unknown
task" error lists these modules.

A module that cannot be imported is remembered, not raised: a
``TASK_MODULES`` entry that does not import (E014), or a ``@task`` that
Django refuses while its module loads, such as a queue its backend's
``QUEUES`` does not list (E025). ``manage.py check`` - and so ``runworker``,
``runserver`` and ``migrate`` - reports them instead of every command
printing a traceback. Any other error in an app's own ``jobs.py`` or
``tasks.py`` is raised, as Django does for ``admin.py``.
"""

from __future__ import annotations

import importlib
import logging

from django.apps import apps
from django.utils.module_loading import module_has_submodule

from django_jobretry.conf.schema import task_modules

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
