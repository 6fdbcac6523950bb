"""The short chaos run (`make chaos-ci`): real workers under faults, then every invariant.

Runs ``python -m chaos --size ci`` in a subprocess: 300 jobs, 2 workers, a
few faults of each kind (docs/reliability.md), a hard deadline on every wait
inside and on the whole run here. With PostgreSQL binaries on the machine the
harness starts a private server it may restart; without them it uses a
scratch database on DATABASE_URL's server and skips the restart fault.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.processes import ROOT, chaos_environment

#: The harness itself gives up after its fault phase plus its drain deadline (about 3 minutes).
DEADLINE_SECONDS = 420

#: The table row of chaos/stale.py's invariant: how many attempt ends it checked, how many violated it.
STALE_ROW = re.compile(r"^\| stale completions accepted +\| +(\d+) \| +(\d+) \| (\w+) +\|$", re.MULTILINE)


@pytest.mark.timeout(DEADLINE_SECONDS + 30)
def test_short_chaos_run_keeps_every_invariant() -> None:
    try:
        run = subprocess.run(
            [sys.executable, "-m", "chaos", "--size", "ci"],
            check=False,
            cwd=ROOT,
            env=chaos_environment(),
            capture_output=True,
            text=True,
            timeout=DEADLINE_SECONDS,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the chaos run did not finish within {DEADLINE_SECONDS}s:\n{exc.stdout!s}")
    assert run.returncode == 0, f"chaos run failed ({run.returncode}):\n{run.stdout}\n{run.stderr[-5000:]}"
    assert "| FAIL" not in run.stdout
    # The promise, "0 stale completions accepted", measured over every end of an attempt.
    stale = STALE_ROW.search(run.stdout)
    assert stale is not None, f"no stale-completion row in the table:\n{run.stdout}"
    checked, violations, result = int(stale[1]), int(stale[2]), stale[3]
    assert (violations, result) == (0, "OK")
    assert checked >= 300, f"only {checked} attempt ends checked for 300 jobs"
