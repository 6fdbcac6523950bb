"""devtools.withdb stops the PostgreSQL it started however the command ends: Ctrl-C, SIGTERM, a stale handle.

Each test runs withdb for real, with a kept data directory (as `make
runserver` does) and DATABASE_URL unset, in a session of its own so that a
SIGINT sent to its process group is what a terminal's Ctrl-C is. The server
is stopped when its ``postmaster.pid`` is gone and its process no longer runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.withdb import forget_dead_handles
from tests.processes import ROOT

#: Seconds withdb may take to start its server and the command, then to stop both.
DEADLINE = 90.0
#: The command: says it runs (with its pid), then waits to be stopped.
COMMAND = "import os, time; print('ready', os.getpid(), flush=True); time.sleep(120)"


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as in a terminal, whatever this test runner ignores


@contextlib.contextmanager
def withdb(data: Path, command: str = COMMAND) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """withdb running ``command`` on a server in ``data``; yields it and the command's pid."""
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    errors = (data.parent / "withdb.stderr").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "devtools.withdb", "--data", str(data), "--", sys.executable, "-c", command],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
        start_new_session=True,
        preexec_fn=_default_sigint,  # noqa: PLW1509 - only resets one signal before exec
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # withdb's deadline: the test's timeout below
        assert line.startswith("ready "), (data.parent / "withdb.stderr").read_text()
        yield process, int(line.split()[1])
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=DEADLINE)
        if process.stdout is not None:
            process.stdout.close()
        errors.close()


def postmaster(data: Path) -> int | None:
    pid_file = data / "postmaster.pid"
    return int(pid_file.read_text().split()[0]) if pid_file.exists() else None


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stopped(server: int) -> None:
    """The server's process ends (its last moments come after it removed its pid file)."""
    deadline = time.monotonic() + DEADLINE
    while running(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(server)


def ended(process: subprocess.Popen[str]) -> int:
    return process.wait(timeout=DEADLINE)


@pytest.mark.timeout(DEADLINE * 2)
@pytest.mark.parametrize(
    ("signum", "to_group"), [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGHUP, False)]
)
def test_a_stop_signal_ends_the_command_and_then_the_server(
    tmp_path: Path, signum: signal.Signals, to_group: bool
) -> None:
    data = tmp_path / "pg"
    with withdb(data) as (process, command_pid):
        server = postmaster(data)
        assert server is not None
        assert running(server)
        if to_group:
            os.killpg(process.pid, signum)  # Ctrl-C: the terminal signals the whole foreground group
        else:
            os.kill(process.pid, signum)  # withdb alone: it passes the signal on
        assert ended(process) == 128 + signum
        assert not running(command_pid)  # withdb waited for it
        assert postmaster(data) is None  # removed by the server as it stopped
        stopped(server)


@pytest.mark.timeout(DEADLINE * 2)
def test_a_second_ctrl_c_while_stopping_does_not_leave_the_server_running(tmp_path: Path) -> None:
    """As when make passes a Ctrl-C on: the command takes a moment to exit, a second SIGINT comes."""
    data = tmp_path / "pg"
    slow = (
        "import os, signal, sys, time\n"
        "def leave(*_):\n"
        "    signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(1); sys.exit(1)\n"
        "signal.signal(signal.SIGINT, leave)\n"
        "print('ready', os.getpid(), flush=True); time.sleep(120)\n"
    )
    with withdb(data, slow) as (process, command_pid):
        server = postmaster(data)
        assert server is not None
        os.killpg(process.pid, signal.SIGINT)
        time.sleep(0.3)  # not a wait for an outcome: the second Ctrl-C comes while the command is leaving
        os.killpg(process.pid, signal.SIGINT)
        assert ended(process) == 128 + signal.SIGINT
        assert not running(command_pid)
        assert postmaster(data) is None
        stopped(server)


def test_a_handle_of_a_killed_process_is_forgotten(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=DEADLINE)
    handles = tmp_path / ".handle_pids.json"
    handles.write_text(json.dumps([gone.pid, os.getpid()]))
    forget_dead_handles(tmp_path)
    assert json.loads(handles.read_text()) == [os.getpid()]
