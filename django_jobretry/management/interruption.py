"""Ctrl-C ends a command of ours at once, even when the database does not answer.

Python turns Ctrl-C into a KeyboardInterrupt, which unwinds through code
that talks to the database on the way out: psycopg answers it in the middle
of a query by sending a cancel request over a new connection and waiting
for the query to end, and Django's ``atomic`` rolls back and reconnects. In
a partition none of them gets an answer, so the command hung on for seconds
to minutes after the operator asked it to stop. So while a command of ours
runs from the command line, its stop signals end the process from the
signal handler: a cancel request for the statements it has running, given
:data:`CANCEL_SECONDS` at most, one line on stderr, and ``os._exit``. The
server rolls back an open transaction when it sees the connection close.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType

from django.db import connections

#: The shell's exit code for a process ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 128 + signal.SIGINT
#: How long a stopped command tries to cancel the statements it had running.
CANCEL_SECONDS = 1.0


@contextlib.contextmanager
def stop_at_once(
    signums: Sequence[signal.Signals], line: Callable[[signal.Signals], str], code: int
) -> Iterator[None]:
    """While inside, each of ``signums`` ends the process: ``line(signal)`` on stderr, exit ``code``.

    Main thread only (the only one Python gives signals to); the old
    handlers come back on the way out.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        for each in signums:  # a second Ctrl-C while stopping changes nothing
            signal.signal(each, signal.SIG_IGN)
        cancel_running_statements()
        with contextlib.suppress(OSError, RuntimeError, ValueError):  # the handler may interrupt a write
            sys.stdout.flush()
        # Straight to the file descriptor: no buffer (which the interrupted code may be using).
        with contextlib.suppress(OSError):
            os.write(2, f"{line(signal.Signals(signum))}\n".encode())
        os._exit(code)

    previous = {signum: signal.signal(signum, stop) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def cancel_running_statements(timeout: float = CANCEL_SECONDS) -> None:
    """Ask the server to cancel the statements this thread's connections are running; never wait longer.

    Only with libpq 17's cancel API (psycopg's ``cancel_safe``), whose wait
    has a timeout; the older one blocks until the kernel gives up on a
    connection nobody answers, so then nothing is sent, and the server ends
    the statement when it notices the closed connection.
    """
    import psycopg

    if not psycopg.capabilities.has_cancel_safe():
        return
    for wrapper in connections.all(initialized_only=True):
        raw = wrapper.connection
        pgconn = getattr(raw, "pgconn", None)
        if pgconn is None or raw.closed or pgconn.transaction_status != psycopg.pq.TransactionStatus.ACTIVE:
            continue
        with contextlib.suppress(psycopg.Error):  # not reachable or too slow: the command leaves anyway
            raw.cancel_safe(timeout=timeout)
