"""A database a management command cannot reach: one line naming it, never a traceback.

PostgreSQL down, a wrong port or password, a database that does not exist:
an operator's mistake or an outage, and the operator needs to know which
database (alias, host, port, name) and the driver's reason, not forty lines
of Django internals. Every command of ours subclasses :class:`DatabaseCommand`.
The test is the connection itself, not the error's text: the error came from
a database this process cannot reach when it passed through an alias whose
connection (in the command's thread) was never opened or has been lost. Any
other database error is a bug, and keeps its traceback.

A database that does not answer at all (a partition) is bounded by the
connect options our processes get (conf/connect_options.py): the command
says it is waiting after a couple of seconds (waiting.py), fails with the
same one line once ``connect_timeout`` runs out, and Ctrl-C ends it within
a couple of seconds (interruption.py).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, OutputWrapper
from django.db import DatabaseError, InterfaceError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from django_jobretry.conf.database_engine import holding_aliases
from django_jobretry.management.interruption import EXIT_INTERRUPTED, Stopped, stop_signals_raise
from django_jobretry.management.terminal_text import printable
from django_jobretry.management.waiting import announced_when_slow

#: The exit code: `deadletters`' "failed" (docs/commands.md), for every command.
EXIT_UNREACHABLE = 4


def _cut_off(wrapper: BaseDatabaseWrapper) -> bool:
    """Whether an error passed through this alias and left it without a connection (psycopg's ``closed``)."""
    raw = wrapper.connection
    return wrapper.errors_occurred and (raw is None or bool(getattr(raw, "closed", False)))


def _where(wrapper: BaseDatabaseWrapper) -> str:
    """Alias, host, port and database name; never the user or password."""
    settings = wrapper.settings_dict
    host = settings.get("HOST") or "localhost"
    port = settings.get("PORT") or "default port"
    return f"database {wrapper.alias!r} (host {host}, port {port}, name {settings.get('NAME')!r})"


class LostConnection(CommandError):
    """The database was reached, then the connection was cut (a restart, a terminated backend)."""


def unreachable(error: DatabaseError | InterfaceError) -> CommandError | None:
    """The one-line error for ``error`` when it came from a database this process cannot reach, else None."""
    cut_off = [wrapper for wrapper in connections.all(initialized_only=True) if _cut_off(wrapper)]
    if not cut_off:
        return None
    wrapper = cut_off[0]
    lines = str(error).strip().splitlines() or [type(error).__name__]
    never = wrapper.connection is None
    kind = CommandError if never else LostConnection
    verb = "could not reach" if never else "lost the connection to"
    return kind(
        f"{verb} {_where(wrapper)}: {printable(lines[0], one_line=True)}", returncode=EXIT_UNREACHABLE
    )


def runs_our_command(argv: Sequence[str]) -> bool:
    """Whether this process is `manage.py COMMAND` (or django-admin) for one of our commands.

    Also true in the process pool's children, which multiprocessing starts
    with their parent's ``sys.argv``.
    """
    ours = {path.stem for path in Path(__file__).with_name("commands").glob("[!_]*.py")}
    return len(argv) > 1 and argv[1] in ours


class DatabaseCommand(BaseCommand):
    """A command of ours: a database it cannot reach ends it with one clean error and exit code 4.

    Run from the command line, it says when its database keeps it waiting,
    and its ``stop_signals`` end it within a couple of seconds, whatever the
    database does: one line on stderr, exit code ``stopped_code``.
    """

    #: False for a command that never queries (showpolicies): nothing to wait for.
    uses_database = True
    stop_signals: tuple[signal.Signals, ...] = (signal.SIGINT,)
    stopped_code = EXIT_INTERRUPTED

    def run_from_argv(self, argv: list[str]) -> None:
        try:
            with stop_signals_raise(self.stop_signals, self.stopped_line, self.stopped_code):
                super().run_from_argv(argv)
        except Stopped as stop:
            signal.signal(stop.signum, signal.SIG_IGN)  # the one line, whatever is pressed meanwhile
            self.stderr.write(self.stopped_line(stop.signum), lambda text: text)
            sys.exit(self.stopped_code)

    def stopped_line(self, signum: signal.Signals) -> str:
        """The one line a command stopped by ``signum`` leaves."""
        return f"stopped by {signum.name}" + (" (Ctrl-C)" if signum == signal.SIGINT else "")

    def execute(self, *args: Any, **options: Any) -> str | None:
        stderr = OutputWrapper(options["stderr"]) if options.get("stderr") else self.stderr
        aliases = holding_aliases() if self.uses_database else []
        try:
            with announced_when_slow(aliases, lambda line: stderr.write(line, lambda text: text)):
                return super().execute(*args, **options)
        except (DatabaseError, InterfaceError) as error:
            clean = unreachable(error)
            if clean is None:
                raise
            raise clean from error
