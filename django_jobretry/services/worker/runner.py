"""Threads that run job handlers; nothing here touches job state.

A runner only calls the registered function and reports what happened; the
main loop records it. No transaction or row lock is held while user code
runs (spec §4 rule 2).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import threading
from dataclasses import dataclass
from typing import Any

from django.db import close_old_connections

from django_jobretry import signals
from django_jobretry.context import JobContext, reset_current_job, set_current_job
from django_jobretry.registry import registry
from django_jobretry.services.history import AttemptEnd
from django_jobretry.services.transitions import ClaimedJob

logger = logging.getLogger("django_jobretry")


class UnknownTask(Exception):
    """The job's task name is not registered in this worker (yet)."""


@dataclass(frozen=True)
class Outcome:
    """What one attempt did: ``error`` None means it succeeded."""

    job: ClaimedJob
    error: BaseException | None = None
    ended: AttemptEnd = AttemptEnd.ERROR


class Runner(threading.Thread):
    """Takes claimed jobs from ``inbox``, runs them, puts Outcomes in ``outbox``."""

    def __init__(
        self,
        index: int,
        *,
        inbox: queue.Queue[ClaimedJob | None],
        outbox: queue.Queue[Outcome],
        wake: threading.Event,
        started: set[int],
        sender: type,
    ) -> None:
        super().__init__(name=f"jobretry-runner-{index}", daemon=True)
        self.inbox, self.outbox, self.wake, self.started, self.sender = inbox, outbox, wake, started, sender

    def run(self) -> None:
        while (job := self.inbox.get()) is not None:
            self.started.add(job.id)
            self.outbox.put(self.execute(job))
            self.wake.set()

    def execute(self, job: ClaimedJob) -> Outcome:
        definition = registry.get(job.task_name)
        if definition is None:
            error = UnknownTask(
                f"unknown task {job.task_name!r}: not registered in this worker (registered: "
                f"{len(registry.names())} tasks). A rolling deploy may not have reached it yet."
            )
            return Outcome(job, error, AttemptEnd.UNKNOWN_TASK)
        for receiver, result in signals.job_started.send_robust(
            self.sender,
            job_id=job.id,
            task_name=job.task_name,
            queue_name=job.queue_name,
            attempt=job.attempt,
        ):
            if isinstance(result, Exception):
                logger.error("job_started receiver %r failed", receiver, exc_info=result)
        close_old_connections()
        token = set_current_job(
            JobContext(job.id, job.task_name, job.queue_name, job.attempt, job.max_attempts)
        )
        try:
            result = definition.func(*job.args, **job.kwargs)
            if inspect.isawaitable(result):
                asyncio.run(_await(result))
        except Exception as error:
            return Outcome(job, error, AttemptEnd.ERROR)
        except BaseException as error:  # SystemExit/KeyboardInterrupt raised by the handler itself
            return Outcome(job, error, AttemptEnd.WORKER_EXIT)
        finally:
            reset_current_job(token)
            close_old_connections()
        return Outcome(job)


async def _await(awaitable: Any) -> Any:
    return await awaitable
