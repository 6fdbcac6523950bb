"""Every management command of ours, with a database it cannot reach: one clean line, exit code 4.

Real `manage.py` processes, as an operator's shell runs them: DATABASE_URL
names a port nothing listens on (this test holds it bound, so nothing else
can take it), or a database the server does not have. The line names the
alias, host, port and database and gives the driver's reason; no traceback.
"""

from __future__ import annotations

import io
import os
import pkgutil
import socket
from collections.abc import Iterator
from importlib import import_module
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import OperationalError, connection

from django_jobretry.management import commands
from django_jobretry.management.cli import EXIT_UNREACHABLE, DatabaseCommand
from tests.manage_py import manage_py

#: Each command of ours with arguments that reach the database (runworker: at start).
COMMANDS = [
    ["jobstatus"],
    ["jobstatus", "--json"],
    ["canceljobs", "1"],
    ["deadletters", "list"],
    ["deadletters", "requeue", "1", "--yes"],
    ["deadletters", "import-django-q2", "--dry-run"],
    ["prunejobs"],
    ["runworker", "--burst"],
    ["schedules"],
    ["schedules", "pause", "nightly"],
    ["flows", "list"],
]


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A local TCP port bound by this test and never listened on: connecting is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    [line] = stderr.strip().splitlines()
    assert line.startswith("CommandError: "), line
    return line.removeprefix("CommandError: ")


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_closed_port_is_named_with_the_drivers_reason(closed_port: int, args: list[str]) -> None:
    url = f"postgres://jobretry@127.0.0.1:{closed_port}/jobretry"
    result = manage_py(*args, env={"DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "tests.settings"})
    message = one_error_line(result.stderr)
    assert result.returncode == EXIT_UNREACHABLE
    assert message.startswith(
        f"could not reach database 'default' (host 127.0.0.1, port {closed_port}, name 'jobretry'): "
    )
    assert "Connection refused" in message
    assert result.stdout == ""


def test_a_database_the_server_does_not_have() -> None:
    # Only the path changes: a socket URL's host stays in its query string.
    url = urlunsplit(urlsplit(os.environ["DATABASE_URL"])._replace(path="/jobretry_no_such_database"))
    result = manage_py("jobstatus", env={"DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "tests.settings"})
    message = one_error_line(result.stderr)
    assert result.returncode == EXIT_UNREACHABLE
    assert "name 'jobretry_no_such_database'" in message
    assert 'database "jobretry_no_such_database" does not exist' in message


@pytest.mark.django_db(transaction=True)
def test_a_connection_lost_midway_is_named_too() -> None:
    """The server ended the session (a restart, a failover) before the command's first query."""
    with connection.cursor() as cursor, pytest.raises(OperationalError):
        cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    try:
        with pytest.raises(CommandError, match=r"^lost the connection to database 'default' \(host ") as lost:
            call_command("jobstatus", stdout=io.StringIO())
    finally:
        connection.close()  # the next test gets a new session
    assert lost.value.returncode == EXIT_UNREACHABLE
    assert "\n" not in str(lost.value)


def test_a_command_that_needs_no_database_runs_without_one(closed_port: int) -> None:
    url = f"postgres://jobretry@127.0.0.1:{closed_port}/jobretry"
    result = manage_py("showpolicies", env={"DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "tests.settings"})
    assert (result.returncode, result.stderr) == (0, "")


def test_every_command_of_ours_is_a_database_command() -> None:
    names = [info.name for info in pkgutil.iter_modules(commands.__path__)]
    assert len(names) >= 6
    for name in names:
        command = import_module(f"{commands.__name__}.{name}").Command
        assert issubclass(command, DatabaseCommand), name
