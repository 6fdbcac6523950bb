"""Run a command with DATABASE_URL pointing at a usable PostgreSQL.

    python -m devtools.withdb --throwaway -- pytest
    python -m devtools.withdb --data .pgdata/demo -- python manage.py demo

If DATABASE_URL is already set it is used as is; otherwise a private server is
started (see devtools.pgembed) and stopped again when the command ends.

The command ends on its own or by a signal: Ctrl-C (SIGINT, which the
terminal sends the command too), SIGTERM or SIGHUP (passed on to the
command). Either way the server is stopped before withdb exits; signals
that arrive meanwhile (a second Ctrl-C) are ignored until it is, so that a
`make runserver` left with Ctrl-C leaves no PostgreSQL running.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import FrameType

from devtools import pgembed

#: The signals that end the command, and then the server.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Seconds the command gets to exit after a stop signal, then after SIGTERM, before SIGKILL.
GRACE_SECONDS = 10.0


class _Stop(Exception):
    """A stop signal arrived while the command ran."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signum)


def run_command(command: list[str], env: dict[str, str]) -> int:
    """Run ``command`` to its end; on a stop signal, end it (politely, then not) and return 128 + signum."""
    child = subprocess.Popen(command, env=env)
    for each in STOP_SIGNALS:
        signal.signal(each, _raise_stop)
    try:
        return child.wait()
    except _Stop as stop:
        signum = stop.signum
    for other in STOP_SIGNALS:  # from now on nothing may cut the shutdown short
        signal.signal(other, signal.SIG_IGN)
    if signum != signal.SIGINT:  # a Ctrl-C reached the command from the terminal already
        child.send_signal(signum)
    try:
        child.wait(timeout=GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        child.terminate()
        try:
            child.wait(timeout=GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return 128 + signum


def forget_dead_handles(data_dir: Path) -> None:
    """Drop the pids of processes gone without closing their pgserver handle (killed: SIGKILL).

    pgserver stops a kept server only when the last process holding a handle
    closes it; one listed handle of a process that no longer exists would
    keep every later run from stopping it.
    """
    handles = data_dir / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _running(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process, running
        pass
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--data", type=Path, help="keep the server's files here between runs")
    where.add_argument("--throwaway", action="store_true", help="use a temporary server, deleted afterwards")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given; put it after --")

    if os.environ.get("DATABASE_URL"):
        print("withdb: using DATABASE_URL from the environment", file=sys.stderr)
        return subprocess.call(command)

    data_dir = Path(tempfile.mkdtemp(prefix="jobretry-pg-")) if args.throwaway else args.data.resolve()
    forget_dead_handles(data_dir)
    try:
        server = pgembed.start(data_dir, throwaway=args.throwaway)
    except pgembed.NoPostgres as exc:
        print(f"withdb: {exc}", file=sys.stderr)
        return 2
    print(f"withdb: embedded PostgreSQL ({server.how}) at {server.url}", file=sys.stderr)
    try:
        return run_command(command, {**os.environ, "DATABASE_URL": server.url})
    finally:
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        server.stop()
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main())
