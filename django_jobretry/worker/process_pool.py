"""The process pool (`runworker --pool process`): each runner hands its jobs to a child process.

A thread cannot be stopped; a process can. So here a time limit is
enforced by killing the child, and a handler that crashes its process
(a segfault, ``os._exit``, the OOM killer) costs one attempt, not the
worker. A child is started with the "spawn" method - a fresh interpreter
that sets Django up itself, sharing no database connection with the worker -
and recycled after ``max_jobs_per_child`` jobs or when its peak memory
passes ``max_memory_mb``. The child classifies a failure itself (the
exception object stays there) and sends back only plain values.
"""

from __future__ import annotations

import logging
import multiprocessing
from datetime import timedelta
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from django_jobretry.exceptions import ChildFailed, ChildStartError, JobTimeout
from django_jobretry.policy import Classification, ErrorKind
from django_jobretry.registry import time_limit
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.history import AttemptEnd, RenderedError, render_error
from django_jobretry.services.outcomes import Failed, Succeeded
from django_jobretry.worker.child import PoolOptions, Reply, child_main

logger = logging.getLogger("django_jobretry")

#: Seconds a new child may take to set Django up before it counts as failed.
START_SECONDS = 120.0


class ChildSlot:
    """One runner's child process, started on first use and replaced when it ends."""

    def __init__(self, options: PoolOptions) -> None:
        self.options = options
        self._child: BaseProcess | None = None
        self._conn: Connection | None = None
        self._jobs = 0
        #: The job the child runs now, so the main loop can kill it when cancelled.
        self.current: int | None = None

    def execute(self, job: ClaimedJob) -> Succeeded | Failed:
        """Run ``job`` in the child; kill the child at the job's time limit."""
        try:
            conn = self._ready()
        except ChildStartError as exc:
            return _failed(job, exc, AttemptEnd.WORKER_EXIT)
        limit = time_limit(job.task_name, job.policy_name)
        self.current = job.id
        try:
            return self._run(conn, job, limit)
        finally:
            self.current = None

    def kill_if_running(self, job_id: int) -> None:
        """Kill the child if it runs ``job_id`` (a cancel); the runner then sees it gone."""
        child = self._child
        if self.current == job_id and child is not None:
            child.kill()

    def _run(self, conn: Connection, job: ClaimedJob, limit: timedelta | None) -> Succeeded | Failed:
        conn.send(job)
        try:
            finished = conn.poll(None if limit is None else limit.total_seconds())
        except (EOFError, OSError):
            finished = True  # the child is gone: recv() below says so
        if not finished:
            self.stop(kill=True)
            return _failed(
                job,
                JobTimeout(
                    f"job {job.id} attempt {job.attempt} ran longer than its timeout of "
                    f"{limit}; its process was killed"
                ),
                AttemptEnd.TIMEOUT,
            )
        try:
            reply: Reply = conn.recv()
        except (EOFError, OSError):
            code = self.stop(kill=True)
            error = ChildFailed(
                f"the process running job {job.id} exited with code {code} before it finished"
            )
            return _failed(job, error, AttemptEnd.WORKER_EXIT)
        self._jobs += 1
        limit_reached = self.options.max_jobs_per_child and self._jobs >= self.options.max_jobs_per_child
        if reply.retiring or limit_reached:
            self.stop(kill=False)
        return _outcome(job, reply)

    def stop(self, *, kill: bool) -> int | None:
        """End the child (politely, or with SIGKILL); returns its exit code."""
        child, conn, self._child, self._conn, self._jobs = self._child, self._conn, None, None, 0
        if child is None:
            return None
        if not kill and conn is not None:
            try:
                conn.send(None)
            except OSError:
                kill = True
        if kill:
            child.kill()
        child.join(10)
        if child.is_alive():  # ignored a polite stop for 10 s
            child.kill()
            child.join()
        if conn is not None:
            conn.close()
        return child.exitcode

    def _ready(self) -> Connection:
        if self._child is not None and self._conn is not None and self._child.is_alive():
            return self._conn
        self.stop(kill=True)
        context = multiprocessing.get_context("spawn")
        parent_end, child_end = context.Pipe()
        child = context.Process(
            target=child_main, args=(child_end, self.options), name="jobretry-child", daemon=True
        )
        child.start()
        child_end.close()
        if not parent_end.poll(START_SECONDS) or _recv_ready(parent_end) is not True:
            child.kill()
            child.join()
            raise ChildStartError(
                f"a job process did not start within {START_SECONDS:g} s (exit code "
                f"{child.exitcode}); see the worker's output"
            )
        self._child, self._conn = child, parent_end
        logger.debug("job process %s started", child.pid, extra={"child_pid": child.pid})
        return parent_end


def _recv_ready(conn: Connection) -> object:
    try:
        return conn.recv()
    except (EOFError, OSError):
        return None


def _failed(job: ClaimedJob, error: BaseException, ended: AttemptEnd) -> Failed:
    """A failure the worker itself observed: always worth retrying."""
    return Failed(job, error, ended, render_error(error), Classification(ErrorKind.RETRYABLE))


def _outcome(job: ClaimedJob, reply: Reply) -> Succeeded | Failed:
    if reply.ended is None:
        return Succeeded(job, reply.result)
    rendered = reply.rendered or RenderedError("", "", "")
    classification = Classification(reply.kind or ErrorKind.RETRYABLE, reply.requested_delay)
    return Failed(job, ChildFailed(rendered.message), reply.ended, rendered, classification)
