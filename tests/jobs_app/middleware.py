"""Test middleware (docs/middleware.md): each records what it saw as an Execution row.

A row's key is ``NAME:STAGE:JOB_ID``, so the rows of one job, in id order,
show the order the chain ran in and the outcome each layer saw.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async

from django_jobretry import FatalError
from django_jobretry.context import JobContext
from tests.jobs_app import async_jobs, jobs
from tests.jobs_app.models import Execution

#: Not callable: check E019.
NOT_CALLABLE = 42


def _note(name: str, stage: str, job: JobContext) -> None:
    Execution.objects.create(key=f"{name}:{stage}:{job.job_id}", attempt=job.attempt, pid=os.getpid())


def _recording(name: str) -> Callable[[JobContext, Callable[[], Any]], Any]:
    def middleware(job: JobContext, call_next: Callable[[], Any]) -> Any:
        _note(name, "enter", job)
        try:
            value = call_next()
        except Exception as exc:
            _note(name, type(exc).__name__, job)
            raise
        _note(name, "returned", job)
        return value

    return middleware


outer = _recording("outer")
inner = _recording("inner")


async def around(job: JobContext, call_next: Callable[[], Any]) -> Any:
    """An ``async def`` middleware: awaited on the event loop, adapted around jobs in threads."""
    await sync_to_async(_note)("around", "enter", job)
    try:
        value = await call_next()
    except Exception as exc:
        await sync_to_async(_note)("around", type(exc).__name__, job)
        raise
    await sync_to_async(_note)("around", "returned", job)
    return value


def broken(job: JobContext, call_next: Callable[[], Any]) -> Any:
    """Raises before calling the chain for ``noop``, after it for ``takes_anything``; others pass."""
    if job.task_name in (jobs.noop.name, async_jobs.noop.name):
        raise RuntimeError("broken middleware before call_next")
    value = call_next()
    if job.task_name == jobs.takes_anything.name:
        raise RuntimeError("broken middleware after call_next")
    return value


def fatal_on_reset(job: JobContext, call_next: Callable[[], Any]) -> Any:
    """Classifies a connection reset as fatal: retrying that partner cannot help."""
    try:
        return call_next()
    except ConnectionResetError as exc:
        raise FatalError(f"the partner reset the connection: {exc}") from exc


def skips(job: JobContext, call_next: Callable[[], Any]) -> Any:
    """Never calls the chain for ``record``: its function is skipped, the attempt succeeds."""
    if job.task_name == jobs.record.name:
        return None
    return call_next()


class Abort(BaseException):
    """Not an Exception: what a middleware might raise to stop everything."""


def aborts(job: JobContext, call_next: Callable[[], Any]) -> Any:
    """Raises a BaseException for ``noop``: the attempt ends as a handler's would, the worker goes on."""
    if job.task_name == jobs.noop.name:
        raise Abort("middleware aborts")
    return call_next()
