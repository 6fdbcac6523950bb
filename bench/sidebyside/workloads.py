"""The workloads, the same for every tool: each tool's child process hands its Tool to ``run``.

A Tool knows how to enqueue, which worker command to start and how to count
what finished; the timing, the order and the checks are here, so every tool
is measured the same way (docs/performance.md, "Side by side with the peers").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from bench.run import percentile
from bench.sidebyside.harness import CREATE_STARTS, STARTS, Failed, report, start_latencies, timed_drain

WORKLOADS = ("enqueue", "bulk", "drain", "fail-twice", "latency", "requeue")


class Tool(Protocol):
    default_concurrency: int
    #: Seconds between the latency samples: a poller's whole poll interval, else a short pause.
    pause: tuple[float, float]
    #: Why a workload cannot run on this tool (no bulk API, no retries), by workload.
    missing: dict[str, str]
    env: dict[str, str]

    def reset(self) -> None: ...
    def enqueue_one(self, number: int) -> None: ...
    def bulk_enqueue(self, count: int) -> None: ...
    def enqueue_many(self, func: str, count: int) -> float: ...
    def commands(self, processes: int, concurrency: int, workload: str) -> list[list[str]]: ...
    def done(self) -> int: ...
    def stored(self) -> int: ...
    def runs_per_job(self) -> float: ...
    def stamp(self, number: int) -> None: ...
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...


def child_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="One tool's figures as JSON (run by bench.sidebyside)")
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--requeue", type=int, default=10_000)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    return parser.parse_args(argv)


def progress(message: str) -> None:
    print(f"    {message}", file=sys.stderr, flush=True)


Extra = Callable[[dict[str, float], dict[str, str]], None]


def run(tool: Tool, args: argparse.Namespace, extra: Extra) -> int:
    """Every selected workload on ``tool``, then ``extra`` (ours: the requeue); prints the JSON.

    A workload that fails is reported as failed (the rest still run) and the child exits 1.
    """
    figures: dict[str, float] = {}
    checks: dict[str, str] = {}
    na = {key: why for key, why in tool.missing.items() if key in args.workloads}
    failed: dict[str, str] = {}
    for workload in args.workloads:
        if workload in na:
            continue
        try:
            if workload == "requeue":
                extra(figures, checks)
            else:
                STEPS[workload](tool, args, figures, checks)
        except Failed as exc:
            print(f"bench.sidebyside: {workload}: {exc}", file=sys.stderr)
            failed[workload] = str(exc)
    report(figures, checks, na, failed)
    return 1 if failed else 0


def single(tool: Tool, args: argparse.Namespace, figures: dict[str, float], checks: dict[str, str]) -> None:
    tool.reset()
    started = time.perf_counter()
    for number in range(args.jobs):
        tool.enqueue_one(number)
    figures["enqueue"] = args.jobs / (time.perf_counter() - started)
    checks["enqueue"] = f"{tool.stored():,} stored"
    progress(f"single enqueue: {figures['enqueue']:,.0f} jobs/s")


def bulk(tool: Tool, args: argparse.Namespace, figures: dict[str, float], checks: dict[str, str]) -> None:
    tool.reset()
    started = time.perf_counter()
    tool.bulk_enqueue(args.jobs)
    figures["bulk"] = args.jobs / (time.perf_counter() - started)
    checks["bulk"] = f"{tool.stored():,} stored"
    progress(f"bulk enqueue: {figures['bulk']:,.0f} jobs/s")


def drain(tool: Tool, args: argparse.Namespace, figures: dict[str, float], checks: dict[str, str]) -> None:
    for processes in (1, 2):
        for key, concurrency in (("1", 1), ("d", tool.default_concurrency)):
            row = f"drain-{processes}-{key}"
            if key == "d" and concurrency == 1:  # the default is 1: the same measurement
                figures[row] = figures[f"drain-{processes}-1"]
                checks[row] = "the default is 1: as above"
                continue
            tool.reset()
            seconds = timed_drain(
                commands=tool.commands(processes, concurrency, "drain"),
                env=tool.env,
                warm=lambda count: tool.enqueue_many("noop", count),
                load=lambda: tool.enqueue_many("noop", args.jobs),
                done=tool.done,
                jobs=args.jobs,
                timeout=args.timeout,
            )
            figures[row] = args.jobs / seconds
            checks[row] = f"{tool.done():,} succeeded ({args.jobs:,} + {processes} warm-up)"
            progress(f"{row}, concurrency {concurrency}: {figures[row]:,.0f} jobs/s")


def fail_twice(
    tool: Tool, args: argparse.Namespace, figures: dict[str, float], checks: dict[str, str]
) -> None:
    tool.reset()
    seconds = timed_drain(
        commands=tool.commands(1, tool.default_concurrency, "fail-twice"),
        env=tool.env,
        warm=lambda count: tool.enqueue_many("noop", count),
        load=lambda: tool.enqueue_many("fail_twice", args.jobs),
        done=tool.done,
        jobs=args.jobs,
        timeout=args.timeout,
    )
    figures["fail-twice"] = args.jobs / seconds
    checks["fail-twice"] = f"{tool.done() - 1:,} succeeded, {tool.runs_per_job():.2f} runs per job"
    progress(f"fail twice then succeed: {figures['fail-twice']:,.0f} successes/s")


def latency(tool: Tool, args: argparse.Namespace, figures: dict[str, float], checks: dict[str, str]) -> None:
    tool.reset()
    tool.query(CREATE_STARTS)
    tool.query(f"TRUNCATE {STARTS}")
    values = start_latencies(
        command=tool.commands(1, tool.default_concurrency, "latency")[0],
        env=tool.env,
        enqueue=tool.stamp,
        query=tool.query,
        samples=args.samples,
        pause=tool.pause,
        timeout=args.timeout,
    )
    figures["latency-p50"] = statistics.median(values)
    figures["latency-p99"] = percentile(values, 99)
    checks["latency-p50"] = checks["latency-p99"] = f"{len(values)} samples after 3 warm-up"
    progress(f"enqueue to start: p50 {figures['latency-p50']:.1f} ms, p99 {figures['latency-p99']:.1f} ms")


STEPS: dict[str, Callable[[Tool, argparse.Namespace, dict[str, float], dict[str, str]], None]] = {
    "enqueue": single,
    "bulk": bulk,
    "drain": drain,
    "fail-twice": fail_twice,
    "latency": latency,
}
