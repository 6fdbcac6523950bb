"""The benchmarks still run: each with a tiny N, once, on the test database.

Figures are not looked at (speed is the benchmark's business, never a
test's); only that every workload finished and did what it must: every
task ran, fail-twice tasks ran three times each, nothing became a dead
letter. A benchmark that no longer runs would otherwise be found only by
the next person who needs its numbers.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.processes import ROOT, test_database_url

pytestmark = pytest.mark.django_db(transaction=True)

#: Seconds the smoke run may take before it fails instead of hanging.
DEADLINE = 180


def test_the_django_q2_benchmark_runs_both_modes_and_workloads() -> None:
    result = subprocess.run(
        [sys.executable, "bench/django_q2.py", "--tasks", "20", "--fail-tasks", "10", "--rounds", "1"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": test_database_url()},
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    rows = [line for line in lines if line.startswith(("| success", "| fail-twice"))]
    assert [row.split("|")[2].strip() for row in rows if "change" not in row] == [
        "alone",
        "with the adapter",
        "alone",
        "with the adapter",
    ], result.stdout
    assert all("| 3.00 |" in row for row in rows if "fail-twice |" in row and "change" not in row), rows
    assert "dead letters written: 0" in result.stdout
