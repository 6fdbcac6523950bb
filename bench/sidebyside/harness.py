"""What every tool's child process shares: worker processes, timed drains, enqueue-to-start samples.

Worker processes are real (``runworker``, ``qcluster``, ``procrastinate worker``,
``db_worker``), each started in a process group of its own and stopped with
SIGTERM, then SIGKILL to the group after a deadline (bench/django_q2.py's ``stop``).
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, NoReturn

from bench.django_q2 import stop
from bench.run import ROOT

#: After the warm-up jobs ran: time for every worker process to finish starting up.
SETTLE_SECONDS = 1.0
#: The stamps of enqueue-to-start: the job's number and the time its function started.
STARTS = "jobretry_sbs_starts"
CREATE_STARTS = f"CREATE UNLOGGED TABLE IF NOT EXISTS {STARTS} (n integer PRIMARY KEY, at float8 NOT NULL)"

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]


class Failed(Exception):
    """A workload did not finish: the child reports it and exits 1."""


def fail(message: str, log: IO[bytes] | None = None) -> NoReturn:
    if log is not None:
        log.seek(0)
        sys.stderr.write(log.read().decode(errors="replace")[-3000:])
    raise Failed(message)


@contextlib.contextmanager
def workers(commands: Sequence[Sequence[str]], env: dict[str, str]) -> Iterator[tuple[list[Any], IO[bytes]]]:
    """Start the worker processes (one log for all); stop them however the block ends."""
    with tempfile.TemporaryFile() as log, contextlib.ExitStack() as stack:
        processes = []
        for command in commands:
            process = subprocess.Popen(  # noqa: S603 - our interpreter, the tools' own commands
                list(command),
                cwd=ROOT,
                env={**env, "PYTHONUNBUFFERED": "1"},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            stack.callback(stop, process)
            processes.append(process)
        yield processes, log


def wait_until(
    done: Callable[[], int], target: int, timeout: float, processes: list[Any], log: IO[bytes]
) -> int:
    """Poll ``done()`` every 10 ms until it reaches ``target``; a worker exit or the deadline fails."""
    deadline = time.perf_counter() + timeout
    while (count := done()) < target:
        if any(process.poll() is not None for process in processes):
            fail(f"a worker exited ({[p.returncode for p in processes]}) at {count} of {target}", log)
        if time.perf_counter() > deadline:
            fail(f"{count} of {target} done after {timeout:g} s", log)
        time.sleep(0.01)
    return count


def timed_drain(
    *,
    commands: Sequence[Sequence[str]],
    env: dict[str, str],
    warm: Callable[[int], object],
    load: Callable[[], float],
    done: Callable[[], int],
    jobs: int,
    timeout: float,
) -> float:
    """Seconds from the commit of ``jobs`` jobs to ``done()`` counting them, workers already warm.

    ``warm(k)`` enqueues k no-op jobs (one per process) that must run first;
    ``load()`` enqueues the jobs in one transaction and returns perf_counter()
    at its commit, the moment they become visible to the workers.
    """
    with workers(commands, env) as (processes, log):
        warm(len(commands))
        wait_until(done, len(commands), timeout, processes, log)
        time.sleep(SETTLE_SECONDS)
        committed = load()
        wait_until(done, len(commands) + jobs, timeout, processes, log)
        return time.perf_counter() - committed


def start_latencies(
    *,
    command: Sequence[str],
    env: dict[str, str],
    enqueue: Callable[[int], None],
    query: Query,
    samples: int,
    pause: tuple[float, float],
    timeout: float,
) -> list[float]:
    """Milliseconds from before ``enqueue(n)`` to the job function's first line, one job at a time.

    The job writes ``time.time()`` into STARTS (stamps.py); the first three
    samples are a warm-up. Between samples the worker is idle for a random
    pause in ``pause`` seconds (a poller's whole interval: the enqueue lands at
    a random point of its cycle).
    """
    rng = random.Random(1)  # noqa: S311 - pauses, not secrets
    warmup = 3
    found: list[float] = []
    with workers([command], env) as (processes, log):
        for n in range(warmup + samples):
            before = time.time()
            enqueue(n)
            deadline = time.perf_counter() + (timeout if n == 0 else 30)
            while not (rows := query(f"SELECT at FROM {STARTS} WHERE n = %s", [n])):  # noqa: S608
                if processes[0].poll() is not None or time.perf_counter() > deadline:
                    fail(f"job {n} of the latency samples never started", log)
                time.sleep(0.001)
            if n >= warmup:
                found.append((rows[0][0] - before) * 1000)
            time.sleep(rng.uniform(*pause))
    return found


def report(
    figures: dict[str, float], checks: dict[str, str], na: dict[str, str], failed: dict[str, str]
) -> None:
    """The child's answer: one JSON line on stdout, which __main__.py reads."""
    print(json.dumps({"figures": figures, "checks": checks, "na": na, "failed": failed}), flush=True)
