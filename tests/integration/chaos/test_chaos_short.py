"""The short chaos run (`make chaos-ci`): real workers under faults, then every invariant.

Runs ``python -m chaos --size ci`` in a subprocess: 300 jobs, 2 workers, a
few faults of each kind (docs/reliability.md), a hard deadline on every wait
inside and on the whole run here. With PostgreSQL binaries on the machine the
harness starts a private server it may restart; without them it uses a
scratch database on DATABASE_URL's server and skips the restart fault.
"""

from __future__ import annotations

import re

import pytest

from tests.processes import run_chaos

#: The harness itself gives up after its fault phase plus its drain deadline (about 3 minutes).
DEADLINE_SECONDS = 420

#: The table row of chaos/stale.py's invariant: how many attempt ends it checked, how many violated it.
STALE_ROW = re.compile(r"^\| stale completions accepted +\| +(\d+) \| +(\d+) \| (\w+) +\|$", re.MULTILINE)


@pytest.mark.timeout(DEADLINE_SECONDS + 30)
def test_short_chaos_run_keeps_every_invariant() -> None:
    stdout = run_chaos("ci", DEADLINE_SECONDS)
    assert "| FAIL" not in stdout
    # The promise, "0 stale completions accepted", measured over every end of an attempt.
    stale = STALE_ROW.search(stdout)
    assert stale is not None, f"no stale-completion row in the table:\n{stdout}"
    checked, violations, result = int(stale[1]), int(stale[2]), stale[3]
    assert (violations, result) == (0, "OK")
    assert checked >= 300, f"only {checked} attempt ends checked for 300 jobs"
