"""Which function path read from django-q2's unsigned Task table the import may sign for replay.

A live django-q2 task is replayed from the package django-q2 signed when
``async_task`` was called: its function path was chosen by the project's
code. A ``Failure`` row is not signed: anyone who can write django-q2's
table can name any function there (``os.system``), and the import signs
what it turns into a dead letter, which a requeue then hands to the
cluster. So before signing, the import checks that the path names a task
function of the project (:func:`refusal`):

1. a dotted path of plain identifiers, ``module.function``;
2. whose module belongs to one of the project's installed apps, other
   than Django's, django-q2's and this package's own (``django.``,
   ``django_q``, ``django_jobretry``): the string is checked before
   anything is imported, so a row cannot make the import load an arbitrary
   module;
3. which imports, and whose attribute is a plain Python function defined
   in that module (``__module__`` and ``__qualname__`` match): not a
   builtin (``os.system``), a class, a method, or a function re-exported
   from elsewhere (``from shutil import rmtree``).

The same rule applies to the task's ``hook``, which django-q2 calls with
the finished task.
"""

from __future__ import annotations

import importlib
import inspect
import re

from django.apps import apps

#: ``module.function``: ASCII identifiers separated by dots, at least one dot.
DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
#: Packages whose functions are never a project's task to replay (they run commands, send mail...).
NOT_PROJECT = ("django", "django_q", "django_jobretry")


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def project_app(module: str) -> str | None:
    """The installed app (its package) ``module`` belongs to; None when it is none of the project's."""
    if any(_inside(module, package) for package in NOT_PROJECT):
        return None
    return next((app.name for app in apps.get_app_configs() if _inside(module, app.name)), None)


def refusal(path: str, what: str = "function") -> str | None:
    """Why ``path`` is not a task function of this project that may be signed; None when it is."""
    if not DOTTED.fullmatch(path):
        return f"its {what} {path[:100]!r} is not a dotted path of a module-level function"
    module, _, name = path.rpartition(".")
    if project_app(module) is None:
        return (
            f"its {what} {path!r} is not in one of the project's installed apps (Django's, django-q2's "
            "and django-jobretry's own functions do not count): only those are signed for replay"
        )
    try:
        found = getattr(importlib.import_module(module), name, None)
    except Exception as exc:  # the project's own module: it may raise anything on import here
        return f"its {what} {path!r} cannot be imported here ({type(exc).__name__})"
    if not inspect.isfunction(found) or (found.__module__, found.__qualname__) != (module, name):
        return f"its {what} {path!r} is not a function defined in {module}"
    return None
