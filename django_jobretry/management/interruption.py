"""Ctrl-C ends a command of ours within a couple of seconds, even when the database does not answer.

A Ctrl-C is still a KeyboardInterrupt, so a command keeps doing what it
does with one: the bulk actions of ``deadletters`` report the batches they
finished, a confirmation prompt counts as "no", psycopg cancels the running
statement and Django's ``atomic`` rolls back. On the way out all of these
talk to the database, though: psycopg sends its cancel request over a new
connection and waits for the statement to end, ``atomic`` reconnects to
roll back. In a partition nothing answers them, and the command used to
hang on for seconds to minutes after the operator asked it to stop. So the
first stop signal also starts a clock: a command not gone
:data:`GRACE_SECONDS` later, or at a second signal, is ended there, with
its one line and its exit code.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType

#: The shell's exit code for a process ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 128 + signal.SIGINT
#: How long a stopped command may take to finish what a KeyboardInterrupt makes it do.
GRACE_SECONDS = 2.0


class Stopped(KeyboardInterrupt):
    """A stop signal (SIGINT, or SIGTERM for a starting worker): a KeyboardInterrupt that knows which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signal.Signals(signum)


@contextlib.contextmanager
def stop_signals_raise(
    signums: Sequence[signal.Signals],
    line: Callable[[signal.Signals], str],
    code: int,
    grace: float = GRACE_SECONDS,
) -> Iterator[None]:
    """While inside, each of ``signums`` raises :class:`Stopped`, and ends the process ``grace`` s later.

    Ended, the process leaves ``line(signal)`` on stderr and exits with
    ``code``; a second signal ends it at once. Main thread only (the only
    one Python gives signals to); the old handlers come back on the way out.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    first: list[signal.Signals] = []

    def end() -> None:
        # Straight to the file descriptor: the main thread may be stuck inside a write.
        with contextlib.suppress(OSError):
            os.write(2, f"{line(first[0])}\n".encode())
        os._exit(code)

    def stop(signum: int, frame: FrameType | None) -> None:
        if first:
            end()
        first.append(signal.Signals(signum))
        with contextlib.suppress(OSError, RuntimeError, ValueError):  # the signal may interrupt a write
            sys.stdout.flush()
        clock = threading.Timer(grace, end)
        clock.daemon = True
        clock.start()
        raise Stopped(signum)

    previous = {signum: signal.signal(signum, stop) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
