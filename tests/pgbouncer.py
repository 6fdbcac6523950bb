"""A real PgBouncer in transaction pooling mode, in front of the test database, for one test.

Each test gets its own ``pgbouncer`` process: its own configuration file in a
temporary directory, a free port on 127.0.0.1, ``pool_mode = transaction``
and a hard deadline to come up; it is stopped when the test ends, before
pytest-django drops the test database. A system-wide PgBouncer (Debian's
package installs a service) is never used.

Without the ``pgbouncer`` binary the tests are skipped, and the reason says
so; with ``JOBRETRY_REQUIRE_PGBOUNCER=1`` (set by ``.ci/run`` once it has
installed it) they fail instead.

Worker subprocesses run with tests/settings_pgbouncer.py: ``default`` goes
through this PgBouncer, ``direct`` straight to PostgreSQL.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from tests.processes import ROOT

REQUIRE = "JOBRETRY_REQUIRE_PGBOUNCER"
#: Server connections per (database, user) pool: small, so the test can look at every one.
POOL_SIZE = 2
START_SECONDS = 10.0


def binary() -> str:
    """The pgbouncer executable; skips (or, with JOBRETRY_REQUIRE_PGBOUNCER=1, fails) without one."""
    found = shutil.which("pgbouncer") or next(
        (path for path in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(path, os.X_OK)), None
    )
    if found is None:
        message = "no pgbouncer binary: the PgBouncer tests need one (make pgbouncer: Debian's package)"
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{message}; {REQUIRE}=1 forbids skipping them", pytrace=False)
        pytest.skip(message)
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class Bouncer:
    """A running PgBouncer: where it listens and how to reach the test database through it."""

    port: int
    database: str
    user: str
    log: Path

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def connect(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url, autocommit=True, connect_timeout=5)

    def env(self, *, listen: str, poll: float) -> dict[str, str]:
        """The environment of a process on tests/settings_pgbouncer.py (``listen``: direct/pooled/off)."""
        return {
            "DJANGO_SETTINGS_MODULE": "tests.settings_pgbouncer",
            "JOBRETRY_PGBOUNCER_URL": self.url,
            "JOBRETRY_TEST_LISTEN": listen,
            "JOBRETRY_TEST_POLL_SECONDS": str(poll),
        }

    def run_python(self, code: str, *, timeout: float = 60.0) -> str:
        """Run ``code`` after django.setup() in a process whose default database is this PgBouncer."""
        from tests.processes import test_database_url

        environment = {**os.environ, "DATABASE_URL": test_database_url(), **self.env(listen="off", poll=1)}
        done = subprocess.run(
            [sys.executable, "-c", f"import django; django.setup()\n{code}"],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def server_settings(self, names: list[str]) -> list[dict[str, str]]:
        """``SHOW name`` on every server connection of the pool, each held in a transaction of its own."""
        clients = [self.connect() for _ in range(POOL_SIZE)]
        try:
            seen = []
            for client in clients:
                client.execute("BEGIN")  # keeps this server connection until ROLLBACK
                seen.append({name: str(client.execute(f"SHOW {name}").fetchone()[0]) for name in names})
            return seen
        finally:
            for client in clients:
                client.execute("ROLLBACK")
                client.close()


def _config(directory: Path, port: int) -> Path:
    settings = connection.settings_dict
    server = {
        "host": settings["HOST"],
        "port": str(settings["PORT"] or ""),
        "dbname": settings["NAME"],
        "user": settings["USER"],
        "password": settings["PASSWORD"],
    }
    target = " ".join(f"{key}={_quoted(str(value))}" for key, value in server.items() if value)
    path = directory / "pgbouncer.ini"
    path.write_text(
        f"[databases]\n{settings['NAME']} = {target}\n\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        # Any client user name: the [databases] entry logs in as the test database's user.
        "auth_type = any\n"
        "pool_mode = transaction\n"
        f"default_pool_size = {POOL_SIZE}\nmin_pool_size = 0\nmax_client_conn = 200\n"
        "ignore_startup_parameters = extra_float_digits\n"
    )
    path.chmod(0o644)
    return path


def _run_as() -> list[str]:
    """PgBouncer refuses to run as root: then it switches to the owner of the socket directory."""
    if os.geteuid() != 0:
        return []
    host = connection.settings_dict["HOST"] or ""
    owner = pwd.getpwuid(os.stat(host).st_uid).pw_name if host.startswith("/") else "nobody"
    return ["-u", "nobody" if owner == "root" else owner]


@pytest.fixture
def pgbouncer(transactional_db: None) -> Iterator[Bouncer]:
    """A PgBouncer (transaction pooling) in front of the test database; always stopped."""
    executable = binary()
    directory = Path(tempfile.mkdtemp(prefix="jobretry-pgbouncer-"))
    directory.chmod(0o755)
    port = free_port()
    config = _config(directory, port)
    log = directory / "pgbouncer.log"
    settings = connection.settings_dict
    bouncer = Bouncer(port, settings["NAME"], settings["USER"] or "postgres", log)
    with log.open("w") as output:
        process = subprocess.Popen(
            [executable, *_run_as(), str(config)], stdout=output, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                with bouncer.connect() as probe:
                    probe.execute("SELECT 1")
                break
            except psycopg.OperationalError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"pgbouncer did not come up on port {port}:\n{log.read_text()}")
                time.sleep(0.05)
        yield bouncer
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(directory, ignore_errors=True)
