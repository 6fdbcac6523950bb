"""Flows under chaos (issue 38, `make chaos-flows` at a small size): every flow invariant holds.

Runs ``python -m chaos --size flows-ci`` in a subprocess: 40 flows of five
steps and two callbacks (chaos/flows.py) beside ordinary jobs, workers
SIGKILLed at random, paused past their lease, their sessions killed, the
server restarted, a hard deadline on every wait inside and on the whole run
here. `make chaos-flows` is the same with 200 flows. That each flow check can
fail is shown by test_chaos_flow_checks.py.
"""

from __future__ import annotations

import re

import pytest

from tests.processes import run_chaos

#: The harness gives up after its fault phase plus its drain deadline (2 minutes); the run takes about one.
DEADLINE_SECONDS = 300

#: A row of the invariant table: its name, how many it checked, how many violated it.
ROW = re.compile(
    r"^\| (?P<name>[^|]+?) +\| +(?P<checked>\d+) \| +(?P<violations>\d+) \| (?P<result>\w+) +\|$"
)


@pytest.mark.timeout(DEADLINE_SECONDS + 30)
def test_flows_under_sigkills_keep_every_invariant() -> None:
    stdout = run_chaos("flows-ci", DEADLINE_SECONDS)
    rows = {m["name"]: m for line in stdout.splitlines() if (m := ROW.match(line))}
    assert all(row["result"] == "OK" and row["violations"] == "0" for row in rows.values()), stdout
    checked = {name: int(row["checked"]) for name, row in rows.items()}
    # 40 flows of 7 steps; 15 edges each (5 between steps, 5 to each callback).
    assert checked["every flow enqueued once and completed"] == 40, stdout
    assert checked["no flow step lost (every step succeeded, none waiting)"] == 280, stdout
    assert checked["each flow step succeeded exactly once (each callback once per flow)"] == 280, stdout
    assert checked["no flow step started before its parents succeeded"] == 600, stdout
    assert checked["stale completions accepted"] >= 280, stdout
    assert "| flows completed / enqueued | 40 / 40 |" in stdout
    assert re.search(r"faults injected \| .*sigkill 5", stdout), stdout
