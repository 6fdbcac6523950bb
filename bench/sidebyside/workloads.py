"""The workloads, the same for every tool: each tool's child process hands its Tool to ``run``.

A Tool knows how to enqueue, which worker command to start and how to count
what finished; the timing, the order and the checks are here, so every tool
is measured the same way (docs/performance.md, "Side by side with the peers").
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from bench.run import percentile
from bench.sidebyside.harness import CREATE_STARTS, STARTS, Failed, report, start_latencies, timed_drain
from bench.sidebyside.table import ROWS

WORKLOADS = ("enqueue", "bulk", "drain", "drain-async", "io-50ms", "fail-twice", "latency", "requeue")
#: The workloads of ``async def`` jobs.
COROUTINES = ("drain-async", "io-50ms")
#: What each ``sleeps`` job of the io-50ms workload awaits: ``asyncio.sleep(IO_SECONDS)``.
IO_SECONDS = 0.05
#: io-50ms runs at most this many jobs per unit of concurrency (N, else 500 at concurrency 1): 25 s at best.
IO_JOBS_PER_SLOT = 500


class Tool(Protocol):
    default_concurrency: int
    #: ``async def`` jobs one process runs at once unless told otherwise.
    default_async_concurrency: int
    #: Seconds between the latency samples: a poller's whole poll interval, else a short pause.
    pause: tuple[float, float]
    #: Why a workload (or one row of it) cannot run on this tool (no bulk API, no retries), by its key.
    missing: dict[str, str]
    env: dict[str, str]

    def reset(self) -> None: ...
    def enqueue_one(self, number: int) -> None: ...
    def bulk_enqueue(self, count: int) -> None: ...
    #: ``func``: "noop", "async_noop", "sleeps" (awaits IO_SECONDS) or "fail_twice".
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
    workload_of = {row: workload for row, workload, *_ in ROWS}
    na = {key: why for key, why in tool.missing.items() if workload_of.get(key, key) in args.workloads}
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


def rate(
    tool: Tool,
    args: argparse.Namespace,
    workload: str,
    func: str,
    *,
    processes: int = 1,
    concurrency: int,
    jobs: int,
) -> float:
    """Jobs/s of one timed drain (harness.timed_drain) of ``jobs`` ``func`` jobs, from an empty table.

    The warm-up jobs are no-ops of the kind the workload runs: plain, or ``async def``.
    """
    tool.reset()
    seconds = timed_drain(
        commands=tool.commands(processes, concurrency, workload),
        env=tool.env,
        warm=functools.partial(tool.enqueue_many, "async_noop" if workload in COROUTINES else "noop"),
        load=functools.partial(tool.enqueue_many, func, jobs),
        done=tool.done,
        jobs=jobs,
        timeout=args.timeout,
    )
    return jobs / seconds


def drain(tool: Tool, args: argparse.Namespace, figures: dict[str, float], checks: dict[str, str]) -> None:
    for processes in (1, 2):
        for key, concurrency in (("1", 1), ("d", tool.default_concurrency)):
            row = f"drain-{processes}-{key}"
            if key == "d" and concurrency == 1:  # the default is 1: the same measurement
                figures[row] = figures[f"drain-{processes}-1"]
                checks[row] = "the default is 1: as above"
                continue
            figures[row] = rate(
                tool, args, "drain", "noop", processes=processes, concurrency=concurrency, jobs=args.jobs
            )
            checks[row] = f"{tool.done():,} succeeded ({args.jobs:,} + {processes} warm-up)"
            progress(f"{row}, concurrency {concurrency}: {figures[row]:,.0f} jobs/s")


def drain_async(
    tool: Tool, args: argparse.Namespace, figures: dict[str, float], checks: dict[str, str]
) -> None:
    """The drain of ``async def`` no-ops: 1 process, the tool's defaults (ours: both concurrencies)."""
    row = "drain-async-1-d"
    concurrency = tool.default_async_concurrency
    figures[row] = rate(tool, args, "drain-async", "async_noop", concurrency=concurrency, jobs=args.jobs)
    checks[row] = f"{tool.done():,} succeeded ({args.jobs:,} + 1 warm-up)"
    progress(f"{row}: {figures[row]:,.0f} jobs/s")


def io(tool: Tool, args: argparse.Namespace, figures: dict[str, float], checks: dict[str, str]) -> None:
    """Jobs awaiting IO_SECONDS each, 1 process, at the default and at 100 coroutines at once."""
    for key, concurrency in (("d", tool.default_async_concurrency), ("100", 100)):
        row = f"io-50ms-{key}"
        if row in tool.missing:
            continue
        if key == "100" and concurrency == tool.default_async_concurrency:
            figures[row] = figures["io-50ms-d"]
            checks[row] = "the default is 100: as above"
            continue
        jobs = min(args.jobs, IO_JOBS_PER_SLOT * concurrency)
        figures[row] = rate(tool, args, "io-50ms", "sleeps", concurrency=concurrency, jobs=jobs)
        capped = f", N capped at {jobs:,}" if jobs < args.jobs else ""
        checks[row] = f"{tool.done():,} succeeded ({jobs:,} + 1 warm-up){capped}"
        progress(f"{row}, {concurrency} at once: {figures[row]:,.0f} jobs/s")


def fail_twice(
    tool: Tool, args: argparse.Namespace, figures: dict[str, float], checks: dict[str, str]
) -> None:
    concurrency = tool.default_concurrency
    figures["fail-twice"] = rate(
        tool, args, "fail-twice", "fail_twice", concurrency=concurrency, jobs=args.jobs
    )
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
    "drain-async": drain_async,
    "io-50ms": io,
    "fail-twice": fail_twice,
    "latency": latency,
}
