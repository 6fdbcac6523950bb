"""The large-table and memory benchmarks still run: each with a tiny N, once, on the test server.

Figures are not looked at (speed and RSS are the benchmarks' business); only
that every row is printed and what each run left behind: every drained job
succeeded (the scripts check that themselves and exit 1 otherwise), every
old succeeded job was pruned, in the batches its size implies.
"""

from __future__ import annotations

import pytest

from django_jobretry.jobs import retention
from tests.processes import run_bench

#: Seconds a smoke run may take before it fails instead of hanging.
DEADLINE = 240
#: The suite's 120 s timeout would kill a smoke run before DEADLINE, and with it the bench's output.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(DEADLINE + 30)]
OLD = 2_500


def cells(stdout: str, label: str) -> list[str]:
    row = next(line for line in stdout.splitlines() if line.startswith(f"| {label}"))
    return [cell.strip() for cell in row.strip("|").split("|")]


def test_the_large_table_benchmark_compares_and_prunes_every_old_job() -> None:
    out = run_bench(
        "bench/large_tables.py",
        *("--jobs", "30", "--succeeded", str(OLD), "--dead", "200", "--claims", "20", "--samples", "3"),
        timeout=DEADLINE,
    )
    for label in (
        "drain, --concurrency 1, jobs/s |",
        "drain, --concurrency 10, jobs/s |",
        "claim of 10 jobs, p99",
        "enqueue to start, p50",
    ):
        row = cells(out, label)
        assert len(row) == 5, row
        assert row[4] in ("yes", "no"), row
    assert cells(out, "rows deleted")[1] == f"{OLD:,} (0 old succeeded jobs left)"
    assert cells(out, "batch size")[1] == f"{retention.PRUNE_BATCH:,}"
    assert cells(out, "batches")[1] == str(-(-OLD // retention.PRUNE_BATCH))
    assert cells(out, "drain, --concurrency 10, during the prune")[1].endswith(
        ("without a prune", "(the prune ended first)")
    )
    assert cells(out, "backends waiting on a lock")[1]
    assert f"prunejobs said: deleted {OLD} succeeded job(s)" in out


def test_the_memory_benchmark_samples_the_worker_until_every_job_ran() -> None:
    out = run_bench(
        "bench/memory.py",
        "--jobs",
        "400",
        "--chunk",
        "150",
        "--every",
        "0.1",
        "--warmup",
        "0",
        timeout=DEADLINE,
    )
    assert cells(out, "jobs run")[1].startswith("400 at "), out
    for label in ("RSS at start", "RSS after warm-up", "RSS largest after warm-up", "RSS at the end"):
        assert cells(out, label)[1].endswith(" MB"), label
    assert cells(out, "target: growth under 10 MB")[1] in ("met", "NOT met")
