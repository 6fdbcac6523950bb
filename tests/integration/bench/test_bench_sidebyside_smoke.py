"""The side-by-side benchmark still runs: ours and the floor, a tiny N, one round.

The peers are left out with an explicit ``--only`` (so the table says
"skipped", never nothing); figures are not looked at, only that every row
and ratio is there and what each workload left behind: counts and states.
"""

from __future__ import annotations

import pytest

from tests.processes import run_bench

pytestmark = pytest.mark.django_db(transaction=True)

#: Seconds the smoke run may take before it fails instead of hanging.
DEADLINE = 240
JOBS = 20


def cells(stdout: str, label: str) -> list[str]:
    row = next(line for line in stdout.splitlines() if line.startswith(f"| {label} |"))
    return [cell.strip() for cell in row.strip("|").split("|")]


def test_the_side_by_side_benchmark_prints_every_row_for_ours_and_the_floor() -> None:
    options = ["--only", "ours", "floor", "--jobs", str(JOBS), "--rounds", "1", "--samples", "3"]
    out = run_bench(
        "-m", "bench.sidebyside", *options, "--requeue", "30", "--timeout", "60", timeout=DEADLINE
    )
    # workload, unit, ours, three peers, floor, ratio to the fastest peer, ratio to the floor
    enqueue = cells(out, "single enqueue, autocommit, one at a time")
    assert enqueue[3:6] == ["skipped (--only/--skip)"] * 3, enqueue
    assert enqueue[2] != "-", enqueue
    assert enqueue[6] != "-", enqueue
    assert enqueue[7] == "-", enqueue  # no peer ran: no ratio to one
    assert enqueue[8].endswith("x"), enqueue
    for label in ("bulk enqueue", "drain, 1 process, concurrency 1", "drain, 1 process, default concurrency"):
        assert cells(out, label)[8].endswith("x"), label
    for label in (
        "drain, 2 processes, default concurrency",
        "enqueue to start, idle worker, p50",
        "requeue of dead letters through the service",
    ):
        assert cells(out, label)[2] not in ("-", "failed"), label
    for label in (
        "drain, `async def` no-ops, 1 process, default concurrency",
        "`async def` jobs awaiting 50 ms, 1 process, default concurrency",
        "`async def` jobs awaiting 50 ms, 1 process, 100 at once",
    ):
        row = cells(out, label)
        assert row[2] not in ("-", "failed"), label
        assert row[6] == "n/a: no worker, nothing awaits", label
    states = [line for line in out.splitlines() if line.startswith(("| django-jobretry |", "| raw psycopg"))]
    assert f"| django-jobretry | enqueue | {JOBS} stored |" in states
    assert f"| django-jobretry | drain-1-d | {JOBS + 1} succeeded ({JOBS} + 1 warm-up) |" in states
    assert f"| django-jobretry | drain-2-d | {JOBS + 2} succeeded ({JOBS} + 2 warm-up) |" in states
    assert f"| django-jobretry | drain-async-1-d | {JOBS + 1} succeeded ({JOBS} + 1 warm-up) |" in states
    assert f"| django-jobretry | io-50ms-d | {JOBS + 1} succeeded ({JOBS} + 1 warm-up) |" in states
    assert "| django-jobretry | io-50ms-100 | the default is 100: as above |" in states
    assert f"| django-jobretry | fail-twice | {JOBS} succeeded, 3.00 runs per job |" in states
    assert "| django-jobretry | requeue | 30 requeued, 30 ready, 0 dead left |" in states
    assert f"| raw psycopg floor | fail-twice | {JOBS} succeeded, 3.00 runs per job, batches of 1 |" in states
    assert "| single enqueue >= 60% of the one-INSERT floor |" in out
    assert "- django-jobretry: async drain ÷ drain, 1 process, default concurrency: " in out
