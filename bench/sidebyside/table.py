"""The side-by-side table: medians and ranges over the rounds, ratios, the targets of issue 12."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: (key, tool name in the table); the first is ours, the last the floor, the peers between.
TOOLS = (
    ("ours", "django-jobretry"),
    ("q2", "django-q2"),
    ("procrastinate", "procrastinate"),
    ("tasks_db", "django-tasks-db"),
    ("floor", "raw psycopg floor"),
)
PEERS = ("q2", "procrastinate", "tasks_db")
#: (row key, workload that measures it, label, unit); "ms" rows: lower is better.
ROWS = (
    ("enqueue", "enqueue", "single enqueue, autocommit, one at a time", "jobs/s"),
    ("bulk", "bulk", "bulk enqueue", "jobs/s"),
    ("drain-1-1", "drain", "drain, 1 process, concurrency 1", "jobs/s"),
    ("drain-1-d", "drain", "drain, 1 process, default concurrency", "jobs/s"),
    ("drain-2-1", "drain", "drain, 2 processes, concurrency 1", "jobs/s"),
    ("drain-2-d", "drain", "drain, 2 processes, default concurrency", "jobs/s"),
    ("drain-async-1-d", "drain-async", "drain, `async def` no-ops, 1 process, default concurrency", "jobs/s"),
    ("io-50ms-d", "io-50ms", "`async def` jobs awaiting 50 ms, 1 process, default concurrency", "jobs/s"),
    ("io-50ms-100", "io-50ms", "`async def` jobs awaiting 50 ms, 1 process, 100 at once", "jobs/s"),
    ("fail-twice", "fail-twice", "fail twice then succeed, 1 process, default concurrency", "successes/s"),
    ("latency-p50", "latency", "enqueue to start, idle worker, p50", "ms"),
    ("latency-p99", "latency", "enqueue to start, idle worker, p99", "ms"),
    ("requeue", "requeue", "requeue of dead letters through the service", "dead letters/s"),
)


@dataclass
class Outcome:
    """One tool's answers, one per round, or why it has none."""

    status: str = ""  # "", "not installed", "skipped (--only/--skip)", "failed"
    rounds: list[dict[str, Any]] = field(default_factory=list)

    def values(self, row: str) -> list[float]:
        return [answer["figures"][row] for answer in self.rounds if row in answer["figures"]]

    def median(self, row: str) -> float | None:
        values = self.values(row)
        return statistics.median(values) if values else None

    def failed(self, workload: str) -> bool:
        return any(workload in answer.get("failed", {}) for answer in self.rounds)

    def na(self, row: str) -> str | None:
        return next((answer["na"][row] for answer in self.rounds if row in answer["na"]), None)


def number(value: float, unit: str) -> str:
    return f"{value:,.1f}" if unit == "ms" else f"{value:,.0f}"


def cell(outcome: Outcome, row: str, workload: str, unit: str) -> str:
    if outcome.status:
        return outcome.status
    if outcome.failed(workload):
        return "failed"
    values = outcome.values(row)
    if not values:
        return f"n/a: {why}" if (why := outcome.na(row) or outcome.na(workload)) else "-"
    text = number(statistics.median(values), unit)
    if len(values) > 1:
        text += f" ({number(min(values), unit)}\N{EN DASH}{number(max(values), unit)})"
    return text


def speedup(ours: float, other: float, unit: str) -> float:
    """How many times better ours is: a rate's ratio, or the inverse ratio of milliseconds."""
    return other / ours if unit == "ms" else ours / other


def fastest_peer(outcomes: dict[str, Outcome], row: str, unit: str) -> tuple[str, float] | None:
    figures = [(key, value) for key in PEERS if (value := outcomes[key].median(row)) is not None]
    if not figures:
        return None
    pick: Callable[..., tuple[str, float]] = min if unit == "ms" else max
    return pick(figures, key=lambda pair: pair[1])


def ratios(outcomes: dict[str, Outcome], row: str, unit: str) -> tuple[str, str]:
    ours = outcomes["ours"].median(row)
    names = dict(TOOLS)
    peer, floor = fastest_peer(outcomes, row, unit), outcomes["floor"].median(row)
    to_peer = to_floor = "-"
    if ours and peer:
        to_peer = f"{speedup(ours, peer[1], unit):.2f}x ({names[peer[0]]})"
    if ours and floor:
        to_floor = f"{speedup(ours, floor, unit):.2f}x"
    return to_peer, to_floor


def render(outcomes: dict[str, Outcome], workloads: list[str]) -> list[str]:
    names = [name for _, name in TOOLS]
    lines = [
        f"| workload | unit | {' | '.join(names)} | ours ÷ fastest peer | ours ÷ floor |",
        "| --- | --- |" + " ---: |" * len(names) + " ---: | ---: |",
    ]
    for row, workload, label, unit in ROWS:
        if workload not in workloads:
            continue
        cells = [cell(outcomes[key], row, workload, unit) for key, _ in TOOLS]
        lines.append(
            f"| {label} | {unit} | {' | '.join(cells)} | {' | '.join(ratios(outcomes, row, unit))} |"
        )
    return lines


def async_lines(outcomes: dict[str, Outcome]) -> list[str]:
    """Each tool's drain of ``async def`` no-ops beside its drain row's (plain; procrastinate's are async)."""
    lines = []
    for key, name in TOOLS:
        coroutines, plain = outcomes[key].median("drain-async-1-d"), outcomes[key].median("drain-1-d")
        if coroutines and plain:
            ratio = coroutines / plain
            lines.append(f"- {name}: async drain ÷ drain, 1 process, default concurrency: {ratio:.2f}x")
    return lines


def checks(outcomes: dict[str, Outcome]) -> list[str]:
    """What every workload left behind, per tool: counts and final states, never durations."""
    lines = ["| tool | row | final state, each round |", "| --- | --- | --- |"]
    for key, name in TOOLS:
        for row, *_ in ROWS:
            states = [answer["checks"][row] for answer in outcomes[key].rounds if row in answer["checks"]]
            if states:
                lines.append(f"| {name} | {row} | {'; '.join(dict.fromkeys(states))} |")
    return lines


#: Issue 12's targets: (text, row, "peer" / "floor" / "procrastinate" / "value" / "processes", bound).
TARGETS = (
    ("single enqueue >= 1.5x the fastest peer", "enqueue", "peer", 1.5),
    ("single enqueue >= 60% of the one-INSERT floor", "enqueue", "floor", 0.6),
    ("bulk enqueue >= 2x procrastinate's batch_defer", "bulk", "procrastinate", 2.0),
    ("bulk enqueue >= 40% of the executemany floor", "bulk", "floor", 0.4),
    ("drain at concurrency 1 >= 0.8x the per-job floor", "drain-1-1", "floor", 0.8),
    ("1 process at the default concurrency >= 20x the fastest peer", "drain-1-d", "peer", 20.0),
    ("1 process at the default concurrency >= 25% of the batch-of-100 floor", "drain-1-d", "floor", 0.25),
    ("fail-twice-then-succeed >= 30x the fastest peer", "fail-twice", "peer", 30.0),
    ("enqueue-to-start p50 < 5 ms", "latency-p50", "value", 5.0),
    ("2 processes >= 1.5x one (default concurrency)", "drain-2-d", "processes", 1.5),
)


def target_lines(outcomes: dict[str, Outcome]) -> list[str]:
    units = {row: unit for row, _, _, unit in ROWS}
    lines = ["| target (issue 12) | measured (medians) | met? |", "| --- | --- | --- |"]
    for text, row, kind, bound in TARGETS:
        ours = outcomes["ours"].median(row)
        other: float | None = None
        if kind == "peer":
            other = (fastest_peer(outcomes, row, units[row]) or ("", None))[1]
        elif kind in ("floor", "procrastinate"):
            other = outcomes[kind].median(row)
        elif kind == "processes":
            other = outcomes["ours"].median("drain-1-d")
        if kind == "value" and ours is not None:
            measured, met = f"{ours:.1f} ms", ours < bound
        elif ours and other:
            factor = speedup(ours, other, units[row])
            measured, met = f"{factor:.2f}x", factor >= bound
        else:
            lines.append(f"| {text} | not measured in this run | - |")
            continue
        lines.append(f"| {text} | {measured} | {'**met**' if met else 'not met'} |")
    return lines
