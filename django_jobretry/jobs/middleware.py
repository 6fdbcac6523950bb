"""Middleware around every attempt: ``JOBRETRY["MIDDLEWARE"]`` (docs/middleware.md).

Each entry is a dotted path to ``middleware(job, call_next)``: ``job`` is the
attempt's :class:`~django_jobretry.context.JobContext`, ``call_next()`` runs
the rest of the chain and the job's function and returns its value or raises
its exception. The first listed is the outermost.

The chain is called where the function was (worker/runner.py ``_handle``),
which the thread pool's runners, the process pool's children and
``django_jobretry.testing.run_jobs`` all go through, so one place covers
them all. Whatever the chain returns or raises is the attempt's outcome:
an exception from a middleware is classified as the handler's own would be
(so ``raise FatalError(...) from exc`` turns a failure fatal), and a
middleware that never calls ``call_next`` skips the function, the attempt
succeeding with what it returned.

The list is imported once per settings (cached on the settings object,
reset by ``override_settings``); with none configured the function is
called directly, so an empty setting costs one attribute read per attempt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django_jobretry.context import JobContext

#: ``middleware(job, call_next) -> value``.
Middleware = Callable[[JobContext, Callable[[], Any]], Any]


def call(middlewares: Sequence[Middleware], job: JobContext, func: Callable[[], Any]) -> Any:
    """Run ``func`` inside ``middlewares``, the first outermost; the chain's value is the outcome."""
    if not middlewares:
        return func()

    def step(index: int) -> Any:
        if index == len(middlewares):
            return func()
        return middlewares[index](job, lambda: step(index + 1))

    return step(0)
