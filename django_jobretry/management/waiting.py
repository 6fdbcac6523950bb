"""A command whose database does not answer says so after a couple of seconds, instead of hanging mute.

In a partition a connection attempt waits for its ``connect_timeout`` and a
query for its ``tcp_user_timeout`` (conf/connect_options.py): seconds, which
an operator at a terminal would otherwise spend wondering. So a command of
ours watches its first round trip to the databases our tables live in:
when no query has answered after :data:`NOTICE_SECONDS`, it prints one line
naming the alias and its host and port (never the user or password), and
goes on waiting until the answer or the timeout comes.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from django.db import connections

#: How long the first round trip may take before the command says it is waiting.
NOTICE_SECONDS = 2.0


def address(alias: str) -> str:
    """``host:port`` of DATABASES[alias], as libpq fills in what is not set."""
    settings = connections.settings[alias]
    return f"{settings.get('HOST') or 'localhost'}:{settings.get('PORT') or 5432}"


def notice(aliases: Sequence[str], seconds: float = NOTICE_SECONDS) -> str:
    """The line: which database the command waits for, and how to stop waiting."""
    where = ", ".join(f"{alias!r} at {address(alias)}" for alias in aliases)
    return f"waiting for the database {where}: no answer after {seconds:g}s yet (Ctrl-C stops) ..."


@contextlib.contextmanager
def announced_when_slow(
    aliases: Sequence[str], say: Callable[[str], object], seconds: float = NOTICE_SECONDS
) -> Iterator[None]:
    """Say :func:`notice` once if no query through ``aliases`` (in this thread) answered within ``seconds``.

    The watch is Django's ``execute_wrapper`` on this thread's connections:
    the connection is opened for the first query, so its first answer ends
    both waits. After that the wrapper only passes queries through.
    """
    if not aliases:
        yield
        return
    timer = threading.Timer(seconds, lambda: say(notice(aliases, seconds)))
    timer.daemon = True

    def first_answer(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        timer.cancel()
        return result

    with contextlib.ExitStack() as stack:
        for alias in aliases:
            stack.enter_context(connections[alias].execute_wrapper(first_answer))
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
