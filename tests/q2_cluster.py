"""A real django-q2 cluster (``manage.py qcluster``) on the test database, with hard deadlines.

The cluster runs with tests/settings.py (Q_CLUSTER there: ORM broker, short
timeout and retry) or another settings module (the Redis broker:
tests/q2_redis.py). It is started in its own session and stopped with
SIGTERM, then its whole process group is killed: django-q2's sentinel does
not watch its parent, so a stray worker must not outlive the test.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from tests.processes import ROOT, test_database_url

#: Seconds a cluster may take to say it is running.
START_SECONDS = 30.0


class Cluster:
    """One qcluster process group and its collected output."""

    def __init__(self, settings: str = "tests.settings", env: dict[str, str] | None = None) -> None:
        environment = {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "DJANGO_SETTINGS_MODULE": settings,
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "qcluster"],
            cwd=ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_running(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while "running." not in self.output:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"qcluster did not start within {START_SECONDS}s:\n{self.output}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # whatever of the group is left
        self.process.wait(timeout=15)
        self._reader.join(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()


def running(settings: str = "tests.settings", env: dict[str, str] | None = None) -> Iterator[Cluster]:
    """A started qcluster, stopped at the end whatever happened (a fixture's body)."""
    started = Cluster(settings, env)
    try:
        started.wait_running()
        yield started
    finally:
        started.stop()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A running qcluster for one test; always stopped, whatever the test did."""
    yield from running()
