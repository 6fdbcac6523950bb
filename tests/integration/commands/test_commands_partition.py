"""Our commands against a partitioned database: they say they wait, time out, and stop at Ctrl-C.

Real `manage.py` processes. The database is a listener on 127.0.0.1 that
accepts and never answers (tests/blackhole.py), or a forwarder to the test
database that goes silent in the middle of a query. Without bounded TCP a
command would hang there for minutes without a word, and Ctrl-C would make
psycopg send a cancel request through the same partition, and wait.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from urllib.parse import quote

import psycopg
import pytest
from django.db import connection

from django_jobretry.management.cli import EXIT_INTERRUPTED, EXIT_UNREACHABLE
from tests.blackhole import Blackhole, Forwarder
from tests.processes import ROOT, test_database_url, wait_until

#: Deadlines, not measures: the notice comes about 2 s after the command's first connection, and
#: a Ctrl-C ends it within about 2 s (docs/commands.md). The stop's is far above that, for a loaded
#: machine's exit under coverage, and below what a command that did not stop would wait for: the
#: 60 s connect_timeout these tests give it, or the 30 s statement_timeout of a worker's session.
NOTICE_DEADLINE = 15
STOP_DEADLINE = 20
#: How long a command may take to start and reach the database: Django's start in a subprocess
#: under coverage, beside other test processes on a loaded machine, takes seconds; it is not timed.
STARTUP_DEADLINE = 90


class Command:
    """`manage.py ARGS` running, its stderr read as it comes, so a test can wait for a line."""

    def __init__(self, *args: str, url: str, options: Mapping[str, object] | None = None) -> None:
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "DJANGO_SETTINGS_MODULE": "tests.settings_connect",
            "JOBRETRY_TEST_DATABASE_OPTIONS": json.dumps(options or {}),
            "PYTHONUNBUFFERED": "1",
        }
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        self.stderr.extend(self.process.stderr)

    def wait_for_line(self, start: str, listener: Blackhole) -> None:
        """The line, within the notice deadline of the command's first connection to ``listener``."""
        wait_until(lambda: bool(listener.accepted), timeout=STARTUP_DEADLINE, what="the command to connect")
        wait_until(
            lambda: any(line.startswith(start) for line in self.stderr),
            timeout=NOTICE_DEADLINE,
            what=f"a line starting {start!r}; stderr so far: {self.stderr}",
        )

    def end(self, timeout: float) -> int:
        """Wait at most ``timeout`` seconds for the exit; its code."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {timeout}s later; stderr: {self.stderr}")
        self.reader.join(timeout=5)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate()


@pytest.fixture
def blackhole() -> Iterator[Blackhole]:
    with Blackhole() as listener:
        yield listener


def url_at(port: int) -> str:
    return f"postgres://jobretry:secret-password@127.0.0.1:{port}/jobretry"


def test_a_command_says_it_waits_and_ctrl_c_ends_it(blackhole: Blackhole) -> None:
    command = Command("jobstatus", url=url_at(blackhole.port), options={"connect_timeout": 60})
    try:
        command.wait_for_line(f"waiting for the database 'default' at 127.0.0.1:{blackhole.port}", blackhole)
        command.process.send_signal(signal.SIGINT)
        code = command.end(timeout=STOP_DEADLINE)
    finally:
        command.kill()
    assert code == EXIT_INTERRUPTED
    waiting, stopped = command.stderr
    assert "secret-password" not in waiting
    assert stopped == "stopped by SIGINT (Ctrl-C)\n"


def test_a_connect_nobody_answers_fails_after_connect_timeout(blackhole: Blackhole) -> None:
    """The default connect_timeout (5 s) ends it: exit 4, the waiting line and the error, no traceback."""
    command = Command("canceljobs", "1", url=url_at(blackhole.port))
    try:
        code = command.end(timeout=STARTUP_DEADLINE + 30)
    finally:
        command.kill()
    assert code == EXIT_UNREACHABLE
    waiting, error = command.stderr
    assert waiting.startswith(f"waiting for the database 'default' at 127.0.0.1:{blackhole.port}: ")
    assert error == (
        f"CommandError: could not reach database 'default' (host 127.0.0.1, port {blackhole.port}, "
        "name 'jobretry'): connection timeout expired\n"
    )


def test_a_starting_worker_says_it_waits_and_stops_at_sigterm(blackhole: Blackhole) -> None:
    """Before it runs, a worker has claimed nothing: a stop request ends it at once, with code 0."""
    command = Command("runworker", url=url_at(blackhole.port), options={"connect_timeout": 60})
    try:
        command.wait_for_line(f"waiting for the database 'default' at 127.0.0.1:{blackhole.port}", blackhole)
        command.process.send_signal(signal.SIGTERM)
        code = command.end(timeout=STOP_DEADLINE)
    finally:
        command.kill()
    assert code == 0
    assert command.stderr[-1] == "stopped by SIGTERM while starting: no job was claimed\n"
    assert not any("Traceback" in line for line in command.stderr)


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_in_a_query_the_partition_swallowed_ends_the_command_all_the_same() -> None:
    """psycopg answers Ctrl-C with a cancel request over a new connection: the partition swallows it too."""
    settings = connection.settings_dict
    host, port = settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432)
    # The embedded server of `make test` listens on a Unix socket only: forward to it there.
    target = f"{host}/.s.PGSQL.{port}" if host.startswith("/") else (host, port)
    with Forwarder(target, b"django_jobretry_job") as proxy:
        password = f":{quote(settings['PASSWORD'])}" if settings["PASSWORD"] else ""
        url = f"postgresql://{quote(settings['USER'])}{password}@127.0.0.1:{proxy.port}/{settings['NAME']}"
        options = {"tcp_user_timeout": 0, "keepalives": 0, "application_name": APPLICATION_NAME}
        command = Command("jobstatus", url=url, options=options)
        try:
            wait_until(proxy.frozen.is_set, timeout=STARTUP_DEADLINE, what="the command's query on the jobs")
            command.process.send_signal(signal.SIGINT)
            code = command.end(timeout=STOP_DEADLINE)
        finally:
            command.kill()
    # The forwarder closed its side: the server ends the session (the test database is dropped at the end).
    wait_until(lambda: not sessions_named(APPLICATION_NAME), what="the command's session to end")
    assert code == EXIT_INTERRUPTED
    assert command.stderr == ["stopped by SIGINT (Ctrl-C)\n"]


APPLICATION_NAME = "jobretry-partition-test"


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_on_a_database_that_answers_cancels_the_statement_and_leaves_one_line() -> None:
    """No partition: the statement waits on a lock; Ctrl-C cancels it on the server, no traceback."""
    with psycopg.connect(test_database_url()) as holder:
        holder.execute("LOCK TABLE django_jobretry_job IN ACCESS EXCLUSIVE MODE")
        command = Command(
            "jobstatus", url=test_database_url(), options={"application_name": APPLICATION_NAME}
        )
        try:
            wait_until(
                lambda: bool(sessions_named(APPLICATION_NAME, waiting=True)),
                what="jobstatus waiting on the lock",
            )
            command.process.send_signal(signal.SIGINT)
            code = command.end(timeout=STOP_DEADLINE)
            # Cancelled, not left queued behind the lock until the server notices the closed socket.
            wait_until(lambda: not sessions_named(APPLICATION_NAME, waiting=True), what="the statement to go")
        finally:
            command.kill()
    assert code == EXIT_INTERRUPTED
    assert command.stderr[-1] == "stopped by SIGINT (Ctrl-C)\n"
    assert not any("Traceback" in line for line in command.stderr), command.stderr


def sessions_named(name: str, *, waiting: bool = False) -> list[int]:
    """Backend pids of sessions called ``name``; only those waiting on a lock when ``waiting``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
            "AND (NOT %s OR wait_event_type = 'Lock')",
            [name, waiting],
        )
        return [row[0] for row in cursor.fetchall()]
