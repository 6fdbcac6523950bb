"""The process pool (`runworker --pool process`): each runner hands its jobs to a child process.

A thread cannot be stopped; a process can. So here a time limit is
enforced by killing the child, and a handler that crashes its process
(a segfault, ``os._exit``, the OOM killer) costs one attempt, not the
worker. A child is started with the "spawn" method - a fresh interpreter
that sets Django up itself, sharing no database connection with the worker -
and recycled after ``max_jobs_per_child`` jobs or when its peak memory
passes ``max_memory_mb``. The child classifies a failure itself (the
exception object stays there) and sends back only plain values.

A child's end is seen by its process (a pidfd on Linux), not by the end of
its pipe: a helper process the handler started may hold the pipe open long
after the child died. A killed child's database sessions are ended too
(worker/child.py), and after the grace period of a shutdown the
worker kills the children still running a job, so none outlives it
(:meth:`ChildSlot.interrupt`).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
import uuid
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from django_jobretry.exceptions import ChildFailed, ChildStartError, JobTimeout
from django_jobretry.jobs.claimed import ClaimedJob, Failed, Succeeded
from django_jobretry.jobs.history import AttemptEnd, RenderedError, render_error
from django_jobretry.policy import Classification, ErrorKind
from django_jobretry.registry import time_limit
from django_jobretry.worker.child import PoolOptions, Reply, child_main, end_sessions

logger = logging.getLogger("django_jobretry")

#: Seconds a new child may take to set Django up before it counts as failed.
START_SECONDS = 120.0
#: Seconds a child told to stop may take to exit before it is killed.
STOP_SECONDS = 10.0


class ChildSlot:
    """One runner's child process, started on first use and replaced when it ends.

    The runner thread starts, waits for, reaps and replaces the child; the
    main loop only kills it (a cancel, the end of a shutdown's grace period),
    under ``_lock``, so it never signals a process already reaped.
    """

    def __init__(self, options: PoolOptions) -> None:
        self.options = options
        self._child: BaseProcess | None = None
        self._conn: Connection | None = None
        self._exited = -1  # readable once the child has ended (a pidfd, or its sentinel)
        self._token = ""  # names the child's database sessions
        self._jobs = 0
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._interrupted = False  # the shutdown's grace period is over: run nothing more
        #: The job the child runs now, so the main loop can kill it when cancelled.
        self.current: int | None = None

    def execute(self, job: ClaimedJob) -> Succeeded | Failed:
        """Run ``job`` in the child; kill the child at the job's time limit."""
        with self._lock:
            if self._interrupted:
                error = ChildFailed(f"job {job.id} was not started: the worker is stopping")
                return _failed(job, error, AttemptEnd.SHUTDOWN)
            self.current = job.id
            self._idle.clear()
        try:
            conn = self._ready()
            return self._run(conn, job, time_limit(job.task_name, job.policy_name))
        except ChildStartError as exc:
            return _failed(job, exc, AttemptEnd.WORKER_EXIT)
        finally:
            with self._lock:
                self.current = None
                self._idle.set()

    def kill_if_running(self, job_id: int) -> None:
        """Kill the child if it runs ``job_id`` (a cancel); the runner then sees it gone."""
        with self._lock:
            if self.current == job_id and self._child is not None:
                self._child.kill()

    def interrupt(self) -> None:
        """The grace period is over: kill the child if it runs a job, and start nothing more."""
        with self._lock:
            self._interrupted = True
            if self._child is not None and self.current is not None:
                self._child.kill()

    def wait_idle(self, timeout: float) -> bool:
        """Whether the runner is done with its job within ``timeout`` s: a killed child reaped, its
        sessions ended."""
        return self._idle.wait(timeout)

    def _run(self, conn: Connection, job: ClaimedJob, limit: timedelta | None) -> Succeeded | Failed:
        with contextlib.suppress(OSError):  # the child is gone: the wait below sees it
            conn.send(job)
        ready = wait([conn, self._exited], None if limit is None else limit.total_seconds())
        if not ready:
            self.stop(kill=True)
            return _failed(
                job,
                JobTimeout(
                    f"job {job.id} attempt {job.attempt} ran longer than its timeout of "
                    f"{limit}; its process was killed"
                ),
                AttemptEnd.TIMEOUT,
            )
        reply = _receive(conn) if conn in ready or conn.poll(0) else None
        if not isinstance(reply, Reply):
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
        """End the child (politely, or with SIGKILL) and reap it; returns its exit code.

        A child that was killed, or ignored the polite stop, may leave a
        statement running on the server: its sessions are ended too.
        """
        with self._lock:
            child, conn, exited, token = self._child, self._conn, self._exited, self._token
            self._child, self._conn, self._exited, self._jobs = None, None, -1, 0
        if child is None:
            return None
        if not kill and conn is not None:
            try:
                conn.send(None)
            except OSError:
                kill = True
        if not kill and not wait([exited], STOP_SECONDS):
            kill = True  # ignored a polite stop
        if kill:
            child.kill()
        child.join()  # it has ended or was killed: this only reaps it
        if exited != child.sentinel:
            os.close(exited)
        if conn is not None:
            conn.close()
        if kill:
            end_sessions(token, child.pid)
        return child.exitcode

    def _ready(self) -> Connection:
        with self._lock:
            if self._child is not None and self._conn is not None and self._child.is_alive():
                return self._conn
        self.stop(kill=True)
        context = multiprocessing.get_context("spawn")
        parent_end, child_end = context.Pipe()
        token = uuid.uuid4().hex[:16]
        child = context.Process(
            target=child_main, args=(child_end, self.options, token), name="jobretry-child", daemon=True
        )
        child.start()
        child_end.close()
        with self._lock:
            self._child, self._conn, self._exited, self._token = child, parent_end, _exit_handle(child), token
            if self._interrupted:
                child.kill()
        if (
            parent_end not in wait([parent_end, self._exited], START_SECONDS)
            or _receive(parent_end) is not True
        ):
            code = self.stop(kill=True)
            raise ChildStartError(
                f"a job process did not start within {START_SECONDS:g} s (exit code {code}); "
                "see the worker's output"
            )
        logger.debug("job process %s started", child.pid, extra={"child_pid": child.pid})
        return parent_end


def _exit_handle(child: BaseProcess) -> int:
    """What becomes readable when ``child`` ends: a pidfd, which no other process can hold open.

    Without pidfds (not Linux) it is the child's sentinel, a pipe that a
    helper process the handler started inherits and may hold open.
    """
    if hasattr(os, "pidfd_open") and child.pid is not None:
        try:
            return os.pidfd_open(child.pid)
        except OSError:  # already ended and reaped: its sentinel is readable too
            pass
    return child.sentinel


def _receive(conn: Connection) -> Reply | bool | None:
    """The child's next message; None when the pipe ended first."""
    try:
        message: Reply | bool = conn.recv()
    except (EOFError, OSError):
        return None
    return message


def _failed(job: ClaimedJob, error: BaseException, ended: AttemptEnd) -> Failed:
    """A failure the worker itself observed: always worth retrying."""
    return Failed(job, error, ended, render_error(error), Classification(ErrorKind.RETRYABLE))


def _outcome(job: ClaimedJob, reply: Reply) -> Succeeded | Failed:
    if reply.ended is None:
        return Succeeded(job, reply.result, reply.finish)
    rendered = reply.rendered or RenderedError("", "", "")
    classification = Classification(reply.kind or ErrorKind.RETRYABLE, reply.requested_delay, reply.rule)
    return Failed(
        job, ChildFailed(rendered.message), reply.ended, rendered, classification, trace_id=reply.trace_id
    )
