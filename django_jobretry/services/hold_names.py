"""Which names a pause may hold: a task or queue the deployment knows, or one said to be coming.

A pause of a misspelt name holds nothing and looks as if it did, so a
pause is refused unless its name is known, with the close known names:

- a task is known if it is registered in this process (``@job``, ``@task``)
  or some job row has it (a task registered only on the workers' hosts);
- a queue is known if it is ``"default"``, the queue of a registered task
  (``@job(queue_name=...)``), listed in ``QUEUES`` of a ``TASKS`` backend
  of ours or in ``JOBRETRY["QUEUE_LIMITS"]``, or some job row has it.

"Some job row has it" is any status, finished jobs included: the name was
real once. To hold a task or queue before its code is deployed, the caller
says so (``holds.pause(..., undeployed=True)``, ``pause --undeployed``, the
admin form's "not deployed yet" box).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from django.conf import settings

from django_jobretry.conf.limits import queue_limits
from django_jobretry.display.suggestions import did_you_mean
from django_jobretry.models import Job
from django_jobretry.policy.limits import InvalidLimit
from django_jobretry.registry import registry

#: Distinct names read from the jobs table to suggest one: enough for any real deployment.
CANDIDATES = 1000
#: The queue a job gets when nothing names one.
DEFAULT_QUEUE = "default"


def declared_tasks() -> set[str]:
    return set(registry.names())


def declared_queues() -> set[str]:
    """The queues the code and settings of this process name (not the jobs table)."""
    queues = {DEFAULT_QUEUE}
    queues |= {task.queue_name for name in registry.names() if (task := registry.get(name)) is not None}
    tasks = getattr(settings, "TASKS", None)
    for backend in tasks.values() if isinstance(tasks, Mapping) else ():
        if isinstance(backend, Mapping) and str(backend.get("BACKEND", "")).endswith("JobRetryBackend"):
            listed = backend.get("QUEUES")
            queues |= {str(queue) for queue in listed} if isinstance(listed, list | tuple | set) else set()
    with contextlib.suppress(InvalidLimit):  # check E050 reports it; a pause need not
        queues |= set(queue_limits())
    return queues


def is_known(kind: str, name: str) -> bool:
    """Whether the queue or task (``kind``) is declared, or on a job: one lookup at most."""
    declared = declared_queues() if kind == "queue" else declared_tasks()
    return name in declared or Job.objects.filter(**{f"{kind}_name": name}).exists()


def unknown(kind: str, name: str) -> str | None:
    """Why a pause of this queue or task would hold nothing, with the close names; None if it is known."""
    if is_known(kind, name):
        return None
    declared = declared_queues() if kind == "queue" else declared_tasks()
    seen = Job.objects.order_by().values_list(f"{kind}_name", flat=True).distinct()[:CANDIDATES]
    other = "task" if kind == "queue" else "queue"
    also = f" It is a {other}'s name: pause the {other} instead." if is_known(other, name) else ""
    return (
        f"{kind} {name!r} is not declared and no job has it, so its pause would hold nothing."
        f"{did_you_mean([name], {*declared, *seen})}{also}"
    )
