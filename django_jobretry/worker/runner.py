"""Threads that run job handlers; nothing here touches job state.

A runner only calls the registered function and reports what happened; the
main loop records it. No transaction or row lock is held while user code
runs (docs/design.md#rule-2).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import threading
from typing import Any

from django.db import close_old_connections

from django_jobretry import signals
from django_jobretry.context import JobContext, reset_current_job, set_current_job
from django_jobretry.exceptions import UnknownTask
from django_jobretry.registry import registry, time_limit
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.history import AttemptEnd, render_error
from django_jobretry.services.outcomes import Failed, Succeeded, send_job_signal
from django_jobretry.worker.time_limits import TimeLimits

logger = logging.getLogger("django_jobretry")


class Runner(threading.Thread):
    """Takes claimed jobs from ``inbox``, runs them, puts Outcomes in ``outbox``."""

    def __init__(
        self,
        index: int,
        *,
        inbox: queue.Queue[ClaimedJob | None],
        outbox: queue.Queue[Succeeded | Failed],
        wake: threading.Event,
        sender: type,
        time_limits: TimeLimits | None = None,
    ) -> None:
        super().__init__(name=f"jobretry-runner-{index}", daemon=True)
        self.inbox, self.outbox, self.wake, self.sender = inbox, outbox, wake, sender
        self.time_limits = time_limits

    def run(self) -> None:
        while (job := self.inbox.get()) is not None:
            self.outbox.put(self.execute(job))
            self.wake.set()

    def execute(self, job: ClaimedJob) -> Succeeded | Failed:
        definition = registry.get(job.task_name)
        if definition is None:
            error = UnknownTask(
                f"unknown task {job.task_name!r}: not registered in this worker (registered: "
                f"{len(registry.names())} tasks). A rolling deploy may not have reached it yet."
            )
            return Failed(job, error, AttemptEnd.UNKNOWN_TASK)
        send_job_signal(self.sender, signals.job_started, job)
        close_old_connections()
        context = JobContext(
            job.id,
            job.task_name,
            job.queue_name,
            job.attempt,
            job.max_attempts,
            original_job_id=job.original_job_id,
            requeue_count=job.requeue_count,
        )
        token = set_current_job(context)
        if self.time_limits is not None:
            self.time_limits.started(job.id, time_limit(job.task_name, job.policy_name))
        try:
            args, kwargs = job.arguments()
            result = definition.func(*args, **kwargs)
            if inspect.isawaitable(result):
                asyncio.run(_await(result))
        except Exception as error:
            return Failed(job, error, AttemptEnd.ERROR, render_error(error))
        except BaseException as error:  # SystemExit/KeyboardInterrupt raised by the handler itself
            return Failed(job, error, AttemptEnd.WORKER_EXIT, render_error(error))
        finally:
            if self.time_limits is not None:
                self.time_limits.returned(job.id)
            reset_current_job(token)
            close_old_connections()
        return Succeeded(job)


async def _await(awaitable: Any) -> Any:
    return await awaitable
