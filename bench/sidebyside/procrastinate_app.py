"""procrastinate's app and tasks for the bench; its workers load it with ``--app``.

The connector is procrastinate's own psycopg pool on DATABASE_URL (the child's
scratch database). The tasks are ``async``, procrastinate's native kind (a sync
task would run in a thread). Fail-twice retries with ``RetryStrategy(wait=0)``:
procrastinate's waits are whole seconds, so 0 is the nearest to 1 ms.
"""

from __future__ import annotations

import asyncio
import os
import time

from procrastinate import App, JobContext, PsycopgConnector, RetryStrategy

from bench.sidebyside.stamps import INSERT

app = App(connector=PsycopgConnector(conninfo=os.environ.get("DATABASE_URL", "")))


@app.task(name="noop")
async def noop(number: int) -> None:
    """Does nothing."""


@app.task(name="sleeps")
async def sleeps(number: int, seconds: float) -> None:
    """I/O-bound: awaits ``seconds`` (workloads.IO_SECONDS)."""
    await asyncio.sleep(seconds)


@app.task(name="fail_twice", pass_context=True, retry=RetryStrategy(max_attempts=5, wait=0))
async def fail_twice(context: JobContext, number: int) -> None:
    """``attempts`` counts the runs before this one (a finished job counts them all): fails runs 1, 2."""
    if context.job.attempts < 2:
        raise ConnectionError(f"run {context.job.attempts + 1} of task {number} fails on purpose")


@app.task(name="stamp", pass_context=True)
async def stamp(context: JobContext, number: int) -> None:
    started = time.time()
    await context.app.connector.execute_query_async(INSERT, n=number, at=started)
