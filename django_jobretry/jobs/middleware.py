"""Middleware around every attempt: ``JOBRETRY["MIDDLEWARE"]`` (docs/middleware.md).

Each entry is a dotted path to ``middleware(job, call_next)``: ``job`` is the
attempt's :class:`~django_jobretry.context.JobContext`, ``call_next()`` runs
the rest of the chain and the job's function and returns its value or raises
its exception. The first listed is the outermost. A middleware may be
``async def``: it then awaits ``call_next()``.

The chain is called where the function was: :func:`call` for a job that runs
in a thread (the thread pool's runners, the process pool's children and
``django_jobretry.testing.run_jobs``), :func:`acall` for a coroutine on the
worker's event loop (worker/event_loop.py). Whatever the chain returns or
raises is the attempt's outcome: an exception from a middleware is
classified as the handler's own would be (so ``raise FatalError(...) from
exc`` turns a failure fatal), and a middleware that never calls
``call_next`` skips the function, the attempt succeeding with what it returned.

A middleware of the other kind is adapted by asgiref, as Django adapts its
own: in a thread an ``async def`` one runs on an event loop of its own and
its ``call_next`` comes back to the thread (so the thread's database
connection stays the job's); on the event loop a plain one runs in a thread
of ``executor`` while the rest of the chain runs on the loop, so it still
sees the coroutine's outcome, at the cost of a thread per attempt in flight.

The list is imported once per settings (cached on the settings object,
reset by ``override_settings``); with none configured the function is
called directly, so an empty setting costs one attribute read per attempt.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async

from django_jobretry.context import JobContext

#: ``middleware(job, call_next) -> value``, or ``async def`` with ``await call_next()``.
Middleware = Callable[[JobContext, Callable[[], Any]], Any]


def call(middlewares: Sequence[Middleware], job: JobContext, func: Callable[[], Any]) -> Any:
    """Run ``func`` inside ``middlewares``, the first outermost; the chain's value is the outcome."""
    if not middlewares:
        return func()

    def step(index: int) -> Any:
        if index == len(middlewares):
            return func()
        middleware = middlewares[index]
        if inspect.iscoroutinefunction(middleware):
            return async_to_sync(middleware)(job, sync_to_async(lambda: step(index + 1)))
        return middleware(job, lambda: step(index + 1))

    return step(0)


async def acall(
    middlewares: Sequence[Middleware],
    job: JobContext,
    func: Callable[[], Awaitable[Any]],
    executor: ThreadPoolExecutor | None = None,
) -> Any:
    """:func:`call` on an event loop: ``func`` makes the coroutine; plain middleware run in ``executor``."""
    if not middlewares:
        return await func()

    async def step(index: int) -> Any:
        if index == len(middlewares):
            return await func()
        middleware = middlewares[index]
        if inspect.iscoroutinefunction(middleware):
            return await middleware(job, lambda: step(index + 1))

        async def rest() -> Any:
            return await step(index + 1)

        in_thread = sync_to_async(middleware, thread_sensitive=False, executor=executor)
        return await in_thread(job, async_to_sync(rest))

    return await step(0)
