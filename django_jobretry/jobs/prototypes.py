"""The saved Job instances an enqueue returns, built without ``Model.__init__`` per job.

A :class:`Shared` is what every job of one definition has; its prototype
(the attributes ``Job(...)`` would set) is built once and copied for each
new job, as unpickling builds instances. Only when something listens to
``pre_init``/``post_init`` is ``Job(...)`` called, so those still fire.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Field
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from django_jobretry.models import Job

#: How many definitions keep their statements and prototype (least recently used first out).
CACHED_DEFINITIONS = 512
#: The arguments, given per job (never taken from the prototype), bound as JSON text and cast to jsonb.
ARGUMENTS = ("args", "kwargs")


@dataclass(frozen=True)
class Shared:
    """The columns every job of one definition has; its statements write them as literals."""

    task_name: str
    queue_name: str
    policy_name: str
    priority: int
    max_attempts: int


@functools.lru_cache(maxsize=CACHED_DEFINITIONS)
def prototype(shared: Shared) -> dict[str, Any]:
    """A job of ``shared`` as ``Job(...)`` builds it, without ``_state``: copied for each new job."""
    values = dict(vars(Job(**vars(shared))))
    del values["_state"]
    return values


@functools.cache
def _fresh_defaults() -> tuple[Field[Any, Any], ...]:
    """Fields whose default is made by a call (``list``, ``dict``): each job needs its own."""
    return tuple(
        field
        for field in Job._meta.concrete_fields
        if field.has_default() and callable(field.default) and field.attname not in ARGUMENTS
    )


def new_jobs(shared: Shared) -> Callable[[dict[str, Any]], Job]:
    """Makes saved jobs of ``shared``: copies of the prototype, as unpickling builds them.

    ``Job(...)`` when something listens to ``pre_init``/``post_init``, so those still fire.
    """
    alias = connection.alias

    def saved(job: Job) -> Job:
        job._state.adding, job._state.db = False, alias
        return job

    if pre_init.has_listeners(Job) or post_init.has_listeners(Job):
        columns = vars(shared)
        return lambda values: saved(Job(**columns, **values))
    attributes_of, fresh = prototype(shared), _fresh_defaults()

    def copy(values: dict[str, Any]) -> Job:
        job = Job.__new__(Job)
        attributes = job.__dict__
        attributes.update(attributes_of)
        for field in fresh:
            attributes[field.attname] = field.get_default()
        attributes.update(values)
        attributes["_state"] = ModelState()
        return saved(job)

    return copy
