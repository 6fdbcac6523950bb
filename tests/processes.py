"""Real worker processes for tests, against the test database, with hard deadlines.

Waiting helpers poll a database condition with a deadline: a bug fails the
test fast instead of hanging it, and nothing "sleeps and hopes".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection
from django.db.models.functions import Now

from devtools import pgembed
from django_jobretry.models import Job, JobStatus
from tests.jobs_app.models import Execution

ROOT = Path(__file__).resolve().parents[1]


def test_database_url() -> str:
    """A DATABASE_URL naming the test database pytest-django created."""
    settings = connection.settings_dict
    user = quote(settings["USER"] or "")
    password = f":{quote(settings['PASSWORD'])}" if settings["PASSWORD"] else ""
    host, port = settings["HOST"] or "", settings["PORT"] or ""
    if host.startswith("/"):  # a socket directory travels in ?host=
        return f"postgresql://{user}{password}@/{settings['NAME']}?host={quote(host)}"
    return f"postgresql://{user}{password}@{host}{':' + str(port) if port else ''}/{settings['NAME']}"


test_database_url.__test__ = False  # type: ignore[attr-defined]


def run_bench(*args: str, timeout: float) -> str:
    """Run ``python ARGS`` (a benchmark script, with tiny options) on the test database; its stdout.

    Fails with the output's tail when it exits non-zero, or when it takes longer than ``timeout``.
    """
    result = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": test_database_url()},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    return result.stdout


def chaos_environment() -> dict[str, str]:
    """The environment of a `python -m chaos` run: a private server when there are binaries for one.

    With PostgreSQL binaries on the machine the harness starts a server it
    may restart; without them it uses a scratch database on DATABASE_URL's.
    """
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    try:
        pgembed._find_binaries()
    except pgembed.NoPostgres:
        if not env.get("DATABASE_URL"):
            pytest.fail(
                "the chaos harness needs PostgreSQL binaries (pgserver, from `make test`) or DATABASE_URL"
            )
    else:
        env.pop("DATABASE_URL", None)  # a private server, so the restart fault runs too
    return env


def run_chaos(size: str, deadline: float) -> str:
    """`python -m chaos --size SIZE`, which must finish within ``deadline`` seconds and exit 0; its output."""
    try:
        run = subprocess.run(
            [sys.executable, "-m", "chaos", "--size", size],
            check=False,
            cwd=ROOT,
            env=chaos_environment(),
            capture_output=True,
            text=True,
            timeout=deadline,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the chaos run did not finish within {deadline}s:\n{exc.stdout!s}")
    assert run.returncode == 0, f"chaos run failed ({run.returncode}):\n{run.stdout}\n{run.stderr[-5000:]}"
    return run.stdout


def spawn_worker(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start `manage.py runworker ARGS` on the test database and settings."""
    environment = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "runworker", "-v", "2", *args],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_until(condition: Callable[[], bool], *, timeout: float = 30.0, what: str = "condition") -> None:
    """Poll ``condition`` every 20 ms until true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def wait_while_progressing(
    done: Callable[[], bool],
    progress: Callable[[], object],
    between: Callable[[], None],
    *,
    stall: float = 30.0,
    what: str = "condition",
) -> None:
    """Call ``between`` until ``done()``; fail once ``progress()`` has not changed for ``stall`` seconds.

    For waits made of several steps (attempts, each perhaps on a freshly booted
    worker): a deadline over the whole wait grows with the number of steps and
    the machine's load (three burst workers booting 15 s each on a loaded
    machine missed a 30 s one), while "no step for ``stall`` seconds" is the
    hang it stands for, however many steps there are. Progress values are
    compared with ``==``.
    """
    seen = progress()
    deadline = time.monotonic() + stall
    while not done():
        if (now := progress()) != seen:
            seen, deadline = now, time.monotonic() + stall
        elif time.monotonic() > deadline:
            pytest.fail(f"no progress in {stall}s (still at {seen!r}) waiting for {what}")
        between()


def finish(process: subprocess.Popen[str], *, timeout: float = 60.0) -> tuple[int, str]:
    """Wait for a worker to exit by itself (hard deadline); returns (code, output)."""
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        pytest.fail(f"worker did not exit within {timeout}s; output:\n{output}")
    return process.returncode, output


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen[str]]]:
    """Collects spawned workers and kills any left running when the test ends."""
    spawned: list[subprocess.Popen[str]] = []
    yield spawned
    for process in spawned:
        if process.poll() is None:
            process.kill()
            process.communicate()


Workers = list[subprocess.Popen[str]]


def spawn(workers: Workers, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    workers.append(process := spawn_worker(*args, env=env))
    return process


def runs(key: str) -> int:
    return Execution.objects.filter(key=key).count()


def pids(key: str) -> list[int]:
    return list(Execution.objects.filter(key=key).order_by("id").values_list("pid", flat=True))


def lease_expired(job_id: int) -> bool:
    """By the database clock (docs/design.md#rule-5), like the worker's recovery."""
    return Job.objects.filter(pk=job_id, status=JobStatus.RUNNING, lease_expires_at__lt=Now()).exists()


def owner_pid(lease_owner: str) -> int:
    """The pid in a worker id ``host:pid:random``."""
    return int(lease_owner.rsplit(":", 2)[1])


# The last query of a worker's LISTEN session (worker/session.py: Listener).
LISTEN_QUERY = "LISTEN django_jobretry"


def db_now() -> datetime:
    """The database's clock (the one every statement of ours reads), in UTC."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        value: datetime = cursor.fetchone()[0]
    return value.astimezone(UTC)


def listen_sessions(since: datetime) -> list[int]:
    """Backend pids of LISTEN sessions on this database opened after ``since``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = %s "
            "AND backend_start >= %s AND pid <> pg_backend_pid()",
            [LISTEN_QUERY, since],
        )
        return [row[0] for row in cursor.fetchall()]


def session_alive(backend_pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [backend_pid])
        return cursor.fetchone() is not None


class Running:
    """Worker processes whose output is read as it comes: a full pipe would block a busy worker's logging."""

    def __init__(self, workers: Workers, count: int, *args: str) -> None:
        self.processes = [spawn(workers, *args) for _ in range(count)]
        self.lines: list[str] = []
        self.readers = [threading.Thread(target=self._read, args=(p,), daemon=True) for p in self.processes]
        for reader in self.readers:
            reader.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        self.lines.extend(process.stdout)

    def wait(self, condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
        """wait_until, failing with the workers' output so far."""
        try:
            wait_until(condition, timeout=timeout, what=what)
        except pytest.fail.Exception:
            pytest.fail(
                f"timed out after {timeout}s waiting for {what}; workers said:\n{''.join(self.lines)[-8000:]}"
            )

    def stop(self) -> str:
        """SIGTERM each worker still running, wait for it (hard deadline); their output."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process, reader in zip(self.processes, self.readers, strict=True):
            try:
                code = process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pytest.fail(f"worker {process.pid} did not stop within 30 s")
            reader.join(timeout=30)
            if process.stdout is not None:
                process.stdout.close()
            said = "".join(self.lines)
            assert code in (0, -signal.SIGKILL), f"worker {process.pid} exited {code}:\n{said}"
        return "".join(self.lines)
