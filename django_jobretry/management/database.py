"""A database a management command cannot reach: one line naming it, never a traceback.

PostgreSQL down, a wrong port or password, a database that does not exist:
an operator's mistake or an outage, and the operator needs to know which
database (alias, host, port, name) and the driver's reason, not forty lines
of Django internals. Every command of ours subclasses :class:`DatabaseCommand`.
The test is the connection itself, not the error's text: the error came from
a database this process cannot reach when it passed through an alias whose
connection (in the command's thread) was never opened or has been lost. Any
other database error is a bug, and keeps its traceback.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, InterfaceError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from django_jobretry.management.terminal_text import printable

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


class DatabaseCommand(BaseCommand):
    """A command of ours: a database it cannot reach ends it with one clean error and exit code 4."""

    def execute(self, *args: Any, **options: Any) -> str | None:
        try:
            return super().execute(*args, **options)
        except (DatabaseError, InterfaceError) as error:
            clean = unreachable(error)
            if clean is None:
                raise
            raise clean from error
