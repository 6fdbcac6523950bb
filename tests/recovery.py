"""After each test: a connection left busy by a stopped test is reset, so one timeout fails one test.

pytest-timeout raises in the test's thread wherever it happens to be, also
inside psycopg while a statement runs. That connection then answers every
later statement with "another command is already in progress", pytest-django's
flush after the test fails with it, and every later test of the same xdist
worker failed too (CI at stop 45: one timeout, 82 failures and errors). After
each test, a connection that saw an error and no longer answers has its
statement cancelled and is closed; whatever else still holds this test
database (threads or processes the stopped test started) is ended; and the
tables are flushed, so the next test starts from the empty database every test
expects. A connection that answers is left alone: this costs nothing unless a
test broke its connection.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from pytest_django.plugin import blocking_manager_key

#: Ends every other session on this test database: only a stopped test's leftovers are there between tests.
END_OTHERS = (
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


def broken(connection: BaseDatabaseWrapper) -> bool:
    """An open connection, outside any atomic block, that saw an error and no longer answers ``SELECT 1``."""
    return (
        connection.connection is not None
        and connection.errors_occurred
        and not connection.in_atomic_block
        and not connection.is_usable()
    )


def reset(connection: BaseDatabaseWrapper) -> None:
    """Cancel the statement still running, close, end the other sessions here, and flush the tables."""
    connection.connection.cancel_safe(timeout=5)
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute(END_OTHERS)
    call_command("flush", database=connection.alias, interactive=False, verbosity=0)


def reset_broken_connections(config: pytest.Config) -> list[str]:
    """Reset each broken connection of this process; the aliases reset."""
    if blocking_manager_key not in config.stash:
        return []
    with config.stash[blocking_manager_key].unblock():
        found = [connection for connection in connections.all(initialized_only=True) if broken(connection)]
        for connection in found:
            reset(connection)
    return [connection.alias for connection in found]
