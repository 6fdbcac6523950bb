"""The child process of the process pool: what runs before and after Django is set up in it.

A "spawn" child starts as a fresh interpreter that unpickles its target and
arguments before anything else. So this module imports nothing that needs
Django's app registry: the job machinery is imported in :func:`child_main`,
after ``django.setup()``.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import resource
import signal
import sys
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django_jobretry.policy import ErrorKind
    from django_jobretry.services.claimed import Finish
    from django_jobretry.services.history import AttemptEnd, RenderedError

#: prctl(2): the signal this process gets when its parent thread ends.
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class PoolOptions:
    """How children are recycled; None: never for that reason."""

    max_jobs_per_child: int | None = None
    max_memory_mb: int | None = None


@dataclass(frozen=True)
class Reply:
    """What a child sends back for one job: plain, picklable values only."""

    ended: AttemptEnd | None  # None: the handler succeeded
    rendered: RenderedError | None = None
    kind: ErrorKind | None = None
    requested_delay: timedelta | None = None
    #: The child is over its memory limit and exits after this reply.
    retiring: bool = False
    #: What a task that keeps results returned, as JSON text, and how its end is announced.
    result: str | None = None
    finish: Finish | None = None
    #: Which rule made the failure fatal (Classification.rule).
    rule: str | None = None
    #: The trace id of the attempt's span, made in the child (services/tracing.py); "": none.
    trace_id: str = ""


def child_main(conn: Connection, options: PoolOptions, token: str) -> None:
    """The child: set Django up, then run the jobs the parent sends until told to stop.

    ``token`` names the child's database sessions, so that the worker can
    end them if it kills the child (worker/child_sessions.py).
    """
    _die_with_the_worker()
    import django

    django.setup()
    from django_jobretry.worker.child_sessions import name_sessions

    name_sessions(token)
    from django_jobretry.registry import policy_for
    from django_jobretry.services.claimed import Succeeded
    from django_jobretry.services.decisions import classify_failure
    from django_jobretry.services.history import render_error
    from django_jobretry.worker.runner import run_handler

    # The worker decides when its children stop: Ctrl-C in a terminal reaches
    # the whole process group, and SIGTERM (sent at the worker's exit) must kill.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    conn.send(True)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        outcome = run_handler(job)
        retiring = _over_memory(options.max_memory_mb)
        if isinstance(outcome, Succeeded):
            conn.send(Reply(None, retiring=retiring, result=outcome.result, finish=outcome.finish))
        else:
            verdict = classify_failure(policy_for(job.task_name, job.policy_name), outcome)
            rendered = outcome.rendered or render_error(outcome.error)
            delay = verdict.requested_delay
            rule, trace_id = verdict.rule, outcome.trace_id  # trace_id: the span ran here, in the child
            conn.send(
                Reply(outcome.ended, rendered, verdict.kind, delay, retiring, rule=rule, trace_id=trace_id)
            )
        if retiring:
            return


def _die_with_the_worker() -> None:
    """On Linux, have the kernel SIGKILL this child when the worker dies, however it dies.

    A worker killed with SIGKILL (the OOM killer, ``kill -9``) or leaving at a
    second signal runs no exit code: its children would run on, with jobs whose
    leases expire and are run again elsewhere, beside them. The signal comes
    when the worker's thread that started the child ends; runner threads stop
    their child before they end.
    """
    parent = multiprocessing.parent_process()
    if not sys.platform.startswith("linux") or parent is None:
        return
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent.pid:  # the worker died before that
        os._exit(1)


def _over_memory(max_mb: int | None) -> bool:
    # ru_maxrss is the peak resident set size, in KiB on Linux.
    return max_mb is not None and resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > max_mb * 1024
