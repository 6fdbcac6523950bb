"""The short partition run (`make chaos-partition`): workers cut off, flapping, slowed; every invariant.

Runs ``python -m chaos --size partition`` in a subprocess: 250 jobs, 2
workers each behind a relay of its own (chaos/relay.py), one blackhole
healed with the held bytes delivered, one healed with its connections
reset, one flapping link, latency and stalls on every link, a SIGKILL and
killed sessions between them (docs/reliability.md#partitions). Every SQL
invariant must hold, and each cut-off worker must warn, naming the
database alias and host, within 10 s and work again within 10 s of the heal.
"""

from __future__ import annotations

import re

import pytest

from tests.processes import run_chaos

#: The harness itself gives up after its fault phase plus its drain deadline (about 4 minutes).
DEADLINE_SECONDS = 360

#: A row of the invariant table: its name, how many it checked, how many violated it.
ROW = re.compile(
    r"^\| (?P<name>[^|]+?) +\| +(?P<checked>\d+) \| +(?P<violations>\d+) \| (?P<result>\w+) +\|$"
)


@pytest.mark.timeout(DEADLINE_SECONDS + 30)
def test_partition_chaos_run_keeps_every_invariant() -> None:
    stdout = run_chaos("partition", DEADLINE_SECONDS)
    rows = {m["name"]: m for line in stdout.splitlines() if (m := ROW.match(line))}
    assert all(row["result"] == "OK" and row["violations"] == "0" for row in rows.values()), stdout
    # Two blackholes and a flapping link, each measured.
    assert int(rows["partitioned workers warn < 10 s, resume < 10 s"]["checked"]) == 3, stdout
    assert int(rows["stale completions accepted"]["checked"]) >= 250, stdout
    assert "faults injected | flapping 1, latency_loss 1, partition 1, partition_reset 1," in stdout
