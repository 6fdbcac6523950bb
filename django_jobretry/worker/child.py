"""The child process of the process pool: what runs before and after Django is set up in it.

A "spawn" child starts as a fresh interpreter that unpickles its target and
arguments before anything else. So this module imports nothing that needs
Django's app registry: the job machinery is imported in :func:`child_main`,
after ``django.setup()``, and the worker's half of ending a child's sessions
in :func:`end_sessions`.

Killing a child ends its process, not its sessions on the server: PostgreSQL
notices that a client is gone only when it next talks to it, so a statement
that was running (a long report, ``pg_sleep``, a transaction holding locks)
runs on, and every retry of the job would add another. So the worker gives
each child a random token, the child puts it in the ``application_name`` of
every connection it opens (a connection parameter: no extra round trip),
and after killing a child the worker terminates the sessions that carry it.
No other session has that name, so a backend pid reused meanwhile is never
hit. A transaction-pooled alias (conf/databases.py) is left alone: its server
sessions are shared by other clients, and ending them is the pooler's
business (PgBouncer's ``query_timeout``).

The runner thread that ends them waits like the worker's own threads do
(worker/watchdog.py): a partition must not keep a killed child's slot, or a
shutdown, waiting.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import resource
import signal
import sys
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from django.db import DatabaseError, InterfaceError, connections

from django_jobretry.conf.databases import transaction_pooled
from django_jobretry.worker import watchdog

if TYPE_CHECKING:
    from django_jobretry.jobs.claimed import Finish
    from django_jobretry.jobs.history import AttemptEnd, RenderedError
    from django_jobretry.policy import ErrorKind

logger = logging.getLogger("django_jobretry")

#: prctl(2): the signal this process gets when its parent thread ends.
PR_SET_PDEATHSIG = 1
#: PostgreSQL keeps the first 63 bytes of an application_name.
NAME_BYTES = 63
#: How long the worker waits for a terminated session to be gone, in milliseconds.
TERMINATE_WAIT_MS = 5000


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
    #: The trace id of the attempt's span, made in the child (jobs/tracing.py); "": none.
    trace_id: str = ""


def child_main(conn: Connection, options: PoolOptions, token: str) -> None:
    """The child: set Django up, then run the jobs the parent sends until told to stop.

    ``token`` names the child's database sessions, so that the worker can
    end them if it kills the child (:func:`end_sessions`).
    """
    _die_with_the_worker()
    import django

    django.setup()
    name_sessions(token)
    from django_jobretry.jobs.claimed import Succeeded
    from django_jobretry.jobs.decisions import classify_failure
    from django_jobretry.jobs.history import render_error
    from django_jobretry.registry import policy_for
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


def session_prefix(token: str) -> str:
    """What every session of the child with ``token`` is named first."""
    return f"jobretry-child-{token}"


def name_sessions(token: str) -> None:
    """In the child, before it connects: name its sessions after ``token``, then the project's name."""
    for alias in _ended_aliases():
        options = connections[alias].settings_dict.setdefault("OPTIONS", {})
        own = options.get("application_name")
        name = f"{session_prefix(token)} {own}" if own else session_prefix(token)
        options["application_name"] = name.encode()[:NAME_BYTES].decode(errors="ignore")


def end_sessions(token: str, child_pid: int | None) -> int:
    """In the worker, once the child with ``token`` is gone: terminate its sessions; how many there were."""
    from django_jobretry.jobs.sql import loggable
    from django_jobretry.worker.session import bound_connects

    ended = 0
    for alias in _ended_aliases():
        connection = connections[alias]
        opened_here = connection.connection is None
        bound_connects(connection)
        try:
            with connection.cursor() as cursor:
                watchdog.guard(connection.connection, alias)
                cursor.execute(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, %s)) FROM pg_stat_activity "
                    "WHERE starts_with(application_name, %s) AND pid <> pg_backend_pid()",
                    [TERMINATE_WAIT_MS, session_prefix(token)],
                )
                ended += cursor.fetchone()[0]
        except (DatabaseError, InterfaceError) as exc:
            fields = loggable(exc)
            place = watchdog.where(alias, connection.connection)
            logger.warning(
                "could not end the database sessions of job process %s on %s (%s, SQLSTATE %s): "
                "a statement it ran may go on until it ends",
                child_pid,
                place,
                fields["error_class"],
                fields["sqlstate"],
                extra={
                    "outcome": "child_sessions_left",
                    "child_pid": child_pid,
                    "database": alias,
                    "where": place,
                    **fields,
                },
            )
        finally:
            if opened_here:
                with contextlib.suppress(DatabaseError, InterfaceError):  # a broken one is gone anyway
                    connection.close()
    if ended:
        logger.info(
            "ended %d database sessions of job process %s",
            ended,
            child_pid,
            extra={"outcome": "child_sessions_ended", "child_pid": child_pid, "sessions": ended},
        )
    return ended


def _ended_aliases() -> list[str]:
    """The PostgreSQL aliases whose sessions a killed child's worker ends."""
    return [
        alias
        for alias in connections
        if connections[alias].vendor == "postgresql" and not transaction_pooled(alias)
    ]
