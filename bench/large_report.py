"""The tables bench/large_tables.py prints: empty against large, then the prune's."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bench import run

if TYPE_CHECKING:
    from bench.large_tables import Pruned, State

CONCURRENCY = (1, 10)


def p(values: Sequence[float], pct: float) -> str:
    return f"{run.percentile(values, pct):.2f} ms" if values else "-"


def ratio_row(what: str, empty: float, large: float, unit: str, higher_is_better: bool) -> str:
    ratio = large / empty
    within = ratio >= 0.8 if higher_is_better else ratio <= 1.2
    return (
        f"| {what} | {empty:,.2f} {unit} | {large:,.2f} {unit} | {ratio:.2f} | {'yes' if within else 'no'} |"
    )


def print_report(
    args: argparse.Namespace, notes: list[str], empty: State, large: State, pruned: Pruned
) -> None:
    for state, name in ((empty, "empty"), (large, "large")):
        spread = ", ".join(f"c{c} {low:,.0f} to {high:,.0f}" for c, (low, high) in state.ranges.items())
        notes.append(
            f"drains: the median of {args.rounds} rounds; range on the {name} table: {spread} jobs/s"
        )
    print()
    for note in notes:
        print(f"- {note}")
    print()
    large_table = f"{args.succeeded:,} succeeded + {args.dead:,} dead"
    print(f"| measurement | empty table | {large_table} | ratio | within 20 % |")
    print("| --- | ---: | ---: | ---: | --- |")
    for c in CONCURRENCY:
        print(
            ratio_row(
                f"drain, --concurrency {c}, jobs/s", empty.drains[c].rate, large.drains[c].rate, "", True
            )
        )
    for c in CONCURRENCY:
        wall = (args.jobs / empty.drains[c].wall, args.jobs / large.drains[c].wall)
        print(ratio_row(f"drain, --concurrency {c}, jobs/s from process start", *wall, "", True))
    for pct in (50, 99):
        claims = (run.percentile(empty.claims, pct), run.percentile(large.claims, pct))
        print(ratio_row(f"claim of 10 jobs, p{pct}", *claims, "ms", False))
        starts = (run.percentile(empty.start, pct), run.percentile(large.start, pct))
        print(ratio_row(f"enqueue to start, p{pct}", *starts, "ms", False))
    from django_jobretry.jobs import retention

    batches = pruned.prune.batches
    durations = batches.durations()
    print()
    print("| prune | result |")
    print("| --- | --- |")
    print(f"| rows deleted | {sum(batches.deleted):,} ({pruned.left:,} old succeeded jobs left) |")
    print(f"| batch size | {retention.PRUNE_BATCH:,} |")
    print(f"| batches | {len(batches.deleted):,} |")
    median, longest = statistics.median(durations) * 1000, max(durations) * 1000
    print(f"| batch time | p50 {median:.1f} ms, longest {longest:.1f} ms |")
    print(f"| prune time | {batches.seconds:.1f} s ({sum(batches.deleted) / batches.seconds:,.0f} rows/s) |")
    during, before = pruned.drain.rate, large.drains[10].rate
    print(
        f"| drain, --concurrency 10, during the prune | {during:,.0f} jobs/s, {during / before:.2f} x the "
        f"{before:,.0f} without a prune{'' if pruned.drain_inside else ' (the prune ended first)'} |"
    )
    print(
        f"| claim of 10 jobs while the prune runs | {len(pruned.claims)} samples, p50 "
        f"{p(pruned.claims, 50)}, p99 {p(pruned.claims, 99)} |"
    )
    print(f"| backends waiting on a lock | {pruned.watch.describe()} |")
    print()
    print(f"prunejobs said: {batches.output}")
