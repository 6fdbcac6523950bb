"""Our retry policies and dead letters for tasks run by a django-q2 cluster (ORM or Redis broker).

Add ``"django_jobretry.contrib.django_q2"`` to INSTALLED_APPS after
``"django_q"`` and ``"django_jobretry"``, and set
``JOBRETRY["DJANGO_Q2"] = {"POLICY": "<policy name>"}``. Existing
``async_task`` calls stay as they are; see docs/django-q2.md.

This module imports nothing from django-q2, so ``retry_policy`` can decorate
task functions in a project that has the adapter installed but not loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: The key of the adapter's state in a django-q2 task package (attempt, history, policy).
KEY = "jobretry"

#: Attribute ``retry_policy`` sets on a task function: a policy name, or None to opt out.
POLICY_ATTRIBUTE = "__jobretry_django_q2_policy__"


def retry_policy[F: Callable[..., Any]](name: str | None) -> Callable[[F], F]:
    """Run this django-q2 task function under policy ``name`` instead of the setting's.

    ``retry_policy(None)`` opts the function out: django-q2's own failure
    handling applies to it, as without the adapter.
    """
    if name is not None and not isinstance(name, str):
        raise TypeError(f"retry_policy() takes a policy name or None, got {type(name).__name__}")

    def apply(func: F) -> F:
        setattr(func, POLICY_ATTRIBUTE, name)
        return func

    return apply


__all__ = ["KEY", "POLICY_ATTRIBUTE", "retry_policy"]
