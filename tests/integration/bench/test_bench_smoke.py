"""The benchmarks still run: each with a tiny N, once, on the test database.

Figures are not looked at (speed is the benchmark's business, never a
test's); only that every workload finished and did what it must: every
task ran, fail-twice tasks ran three times each, nothing became a dead
letter. A benchmark that no longer runs would otherwise be found only by
the next person who needs its numbers.
"""

from __future__ import annotations

import pytest

from tests.processes import run_bench

#: Seconds the smoke run may take before it fails instead of hanging.
DEADLINE = 180
#: The suite's 120 s timeout would kill a smoke run before DEADLINE, and with it the bench's output.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(DEADLINE + 30)]


def test_the_django_q2_benchmark_runs_both_modes_and_workloads() -> None:
    out = run_bench(
        "bench/django_q2.py", "--tasks", "20", "--fail-tasks", "10", "--rounds", "1", timeout=DEADLINE
    )
    lines = out.splitlines()
    rows = [line for line in lines if line.startswith(("| success", "| fail-twice"))]
    assert [row.split("|")[2].strip() for row in rows if "change" not in row] == [
        "alone",
        "with the adapter",
        "alone",
        "with the adapter",
    ], out
    assert all("| 3.00 |" in row for row in rows if "fail-twice |" in row and "change" not in row), rows
    assert "dead letters written: 0" in out


def test_the_dead_letter_admin_benchmark_runs_as_make_bench_runs_it() -> None:
    """Without --succeeded, as `make bench` calls it: the jobs table is left empty, every page is listed."""
    out = run_bench("bench/deadletters.py", "--rows", "10000", "--repeat", "1", timeout=DEADLINE)
    pages = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")]
    assert {"list, first page", "detail page", "dashboard"} <= set(pages), out
    assert "jobs table: 0 succeeded jobs" in out


def test_the_schedules_benchmark_measures_every_look() -> None:
    out = run_bench("bench/schedules.py", "--schedules", "20", "--repeat", "1", timeout=DEADLINE)
    looks = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| look,")]
    assert looks == ["look, nothing due", "look, 1 due", "look, 2 due", "look, all 20 due"], out
    assert "runs a minute" in out


def test_the_requeue_benchmark_moves_every_dead_letter_each_way() -> None:
    out = run_bench("bench/requeue.py", "--sizes", "300", "--sample", "20", "--rounds", "1", timeout=DEADLINE)
    methods = [line.split("|")[2].strip() for line in out.splitlines() if line.startswith("| 300 |")]
    assert methods == [
        "per-row requeue()",
        "requeue_many()",
        "discard_many()",
        "floor: INSERT ... SELECT + DELETE",
    ], out
    assert "300: requeue_many" in out


def test_the_failure_groups_benchmark_counts_every_dead_letter() -> None:
    out = run_bench("bench/failure_groups.py", "--rows", "2000", "--rounds", "1", timeout=DEADLINE)
    every = next(line for line in out.splitlines() if line.strip().startswith("every group"))
    assert "groups of 2,000;" in every, out
    assert "target: under 1000 ms for 2,000 dead letters" in out


def test_the_limits_benchmark_drains_every_setup() -> None:
    out = run_bench("bench/limits.py", "--jobs", "200", "--rounds", "1", timeout=DEADLINE)
    rows = [
        line.split("|")[1].strip()
        for line in out.splitlines()
        if line.startswith("| ") and "jobs/s" not in line
    ]
    assert rows == [
        "none declared",
        "declared, unused",
        "global limit (concurrency=10)",
        "1,000 keys (concurrency=1 per key)",
    ], out


def test_the_flows_benchmark_drains_every_shape() -> None:
    out = run_bench("bench/flows.py", "--steps", "50", "--rounds", "1", timeout=DEADLINE)
    rows = [
        line.split("|")[1].strip()
        for line in out.splitlines()
        if line.startswith("| ") and "jobs/s" not in line
    ]
    assert rows == ["no flow", "batch + on_success", "fan-out/fan-in (1 -> N -> 1)"], out
    assert "enqueue: no flow" in out


def test_the_flows_scale_benchmark_checks_the_chains_order_and_the_batchs_callback() -> None:
    out = run_bench("bench/flows_scale.py", "--chain", "5", "--batch", "20", timeout=DEADLINE)
    rows = [
        line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| ") and "jobs/s" not in line
    ]
    assert [(row[0].strip(), row[1].strip(), row[-1].strip()) for row in rows] == [
        ("chain of 5", "5", "ok"),
        ("batch of 20 + on_success", "21", "ok"),
    ], out
