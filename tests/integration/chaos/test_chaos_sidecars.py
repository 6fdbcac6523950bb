"""The chaos harness's sidecars outlive a database they cannot reach, as workers do.

A restart of the harness's server (the pg_restart fault) may catch the pruner
inside `manage.py prunejobs`, which reports an unreachable database as a
CommandError with exit code 4 (django_jobretry/management/cli.py), not
as a DatabaseError. The sidecar must go on to its next round, and exit 0 only
when stopped, or the "processes exit only when killed" invariant fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.processes import ROOT

#: Nothing listens there: every connection is refused at once.
UNREACHABLE = "postgres://nobody@127.0.0.1:1/chaos"
DEADLINE = 60


def test_the_pruner_keeps_going_while_the_database_is_unreachable() -> None:
    env = {**os.environ, "DATABASE_URL": UNREACHABLE, "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    pruner = subprocess.Popen(
        [sys.executable, "-m", "chaos.sidecars", "pruner"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert pruner.stdout is not None
        lines: list[str] = []
        give_up = time.monotonic() + DEADLINE
        while len([line for line in lines if "could not reach" in line]) < 2:
            assert time.monotonic() < give_up, f"no two failed rounds within {DEADLINE}s: {lines}"
            line = pruner.stdout.readline()
            assert line or pruner.poll() is None, f"the pruner exited {pruner.poll()} by itself: {lines}"
            lines.append(line)
        pruner.send_signal(signal.SIGTERM)
        output, _ = pruner.communicate(timeout=DEADLINE)
    finally:
        if pruner.poll() is None:
            pruner.kill()
            pruner.communicate()
    assert pruner.returncode == 0, "".join(lines) + output
    assert "Traceback" not in "".join(lines) + output
