"""A claimed job, as the worker holds it from its claim until its outcome is recorded."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django_jobretry.exceptions import UndecodableArguments
from django_jobretry.services.sql import as_json


@dataclass(frozen=True)
class ClaimedJob:
    """What a worker needs to run one claimed attempt and fence its outcome.

    The arguments stay as the database sent them (jsonb text) until the
    runner thread decodes them with :meth:`arguments`: a row nested too deep
    for Python, or holding something else than a list and an object, then
    fails its own attempt, not the main loop and the rest of its batch.
    """

    id: int
    task_name: str
    queue_name: str
    policy_name: str
    raw_args: Any
    raw_kwargs: Any
    attempt: int
    max_attempts: int
    token: uuid.UUID
    #: The job id the requeue chain started from; ``id`` when never requeued.
    original_job_id: int
    requeue_count: int

    def arguments(self) -> tuple[list[Any], dict[str, Any]]:
        """(args, kwargs) decoded; :class:`UndecodableArguments` says why they cannot be."""
        try:
            args, kwargs = as_json(self.raw_args), as_json(self.raw_kwargs)
        except (ValueError, RecursionError) as exc:
            raise UndecodableArguments(
                f"the arguments of job {self.id} cannot be decoded ({type(exc).__name__}); "
                "they were not written by enqueue()"
            ) from None
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise UndecodableArguments(
                f"the arguments of job {self.id} are a {type(args).__name__} and a "
                f"{type(kwargs).__name__}, not a list and an object; they were not written by enqueue()"
            )
        return args, kwargs

    @property
    def args(self) -> list[Any]:
        return self.arguments()[0]

    @property
    def kwargs(self) -> dict[str, Any]:
        return self.arguments()[1]
