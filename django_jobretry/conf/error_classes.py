"""A policy's lists of exception classes (fatal_errors, retryable_errors): imported and checked (E006).

Apart from the rest of the schema because importing user code has its own
failure modes: a module that does not import, a name that is not an
exception class, a misspelt class that a close one in the same module
suggests.
"""

from __future__ import annotations

import importlib

from django.utils.module_loading import import_string

from django_jobretry.conf.problems import Problem
from django_jobretry.display import did_you_mean

_IMPORT_HINT = "Give the dotted path of an exception class, e.g. 'smtplib.SMTPRecipientsRefused'."


def import_error_classes(where: str, key: str, paths: object) -> tuple[list[type], list[Problem]]:
    """The exception classes a policy's ``fatal_errors``/``retryable_errors`` name; E006 for each bad one."""
    if isinstance(paths, str) or not isinstance(paths, list | tuple):
        msg = f'{where}["{key}"] must be a list of dotted paths to exception classes, got {paths!r}.'
        return [], [Problem("E006", msg, 'e.g. ["smtplib.SMTPRecipientsRefused"]')]
    classes: list[type] = []
    problems: list[Problem] = []
    for path in paths:
        try:
            klass = import_string(path) if isinstance(path, str) else path
        except Exception as exc:  # a module failing to import for any reason is E006
            msg = f'{where}["{key}"]: cannot import {path!r} ({type(exc).__name__}: {exc}).'
            problems.append(Problem("E006", msg + _close_exception_classes(path), _IMPORT_HINT))
            continue
        if not (isinstance(klass, type) and issubclass(klass, BaseException)):
            msg = f'{where}["{key}"]: {path!r} is not an exception class.'
            problems.append(Problem("E006", msg, _IMPORT_HINT))
            continue
        classes.append(klass)
    return classes, problems


def _close_exception_classes(path: str) -> str:
    """' Did you mean ...?' for an exception class of the same module close to the missing name, or ''."""
    module_path, _, name = path.rpartition(".")
    try:
        module = importlib.import_module(module_path)
    except Exception:  # the module itself does not import: nothing to suggest from
        return ""
    known = {
        attribute
        for attribute, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    return did_you_mean([name], known, prefix=f"{module_path}.")
