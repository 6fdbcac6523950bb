"""The fault "a SIGTERM-ignoring child": a process-pool worker asked to stop while its child ignores SIGTERM.

The worker (``--pool process``, alone on the ``stubborn`` queue) runs
chaos.stubborn, whose first attempt ignores SIGTERM and then sleeps far
past every deadline here. Asked to stop, the worker must kill the child
once its grace period is over, reap it, only then record the attempt as
"shutdown", and exit 0 (docs/worker.md#stopping-signals-and-graceful-shutdown).
Its exit is kept as a SIGTERM stop, so the process invariant wants code 0.
The fault names the child as its target only if the child was gone once
the worker had exited: a child that outlived its worker (and would run
beside the job's next attempt) leaves its attempt unexplained, which the
duplicate-start invariant reports. A second worker then runs the next
attempt, so the key ends like any other.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime

import psycopg

from chaos import jobs, workload
from chaos.processes import ROOT, Exit, Pool

#: The stubborn worker's --shutdown-timeout, in seconds.
GRACE = "1"
#: Seconds for a worker to start and its child to start the job.
START_SECONDS = 60.0
#: Seconds for a worker to exit after SIGTERM: the grace period, the kill, the reap.
EXIT_SECONDS = 30.0
#: What the first attempt sleeps: it never ends by itself within the run.
SLEEP_SECONDS = 600.0

FIRST_START = """
SELECT a.pid FROM chaos_attempt AS a JOIN chaos_enqueued AS e ON e.job_id = a.job_id
WHERE e.key = %s AND a.attempt = 1
"""


def run(pool: Pool, url: str, key: str) -> tuple[int | None, datetime, datetime, str]:
    """Inject the fault for job ``key``; returns its target pid, time window and what happened."""
    workload.enqueue_one(key, "stubborn", jobs.stubborn, key, SLEEP_SECONDS, deadline=time.monotonic() + 60)
    first = _worker(pool, f"{key}-worker-1", "--shutdown-timeout", GRACE)
    child = _first_start(url, key, first)
    started = datetime.now(UTC)
    first.send_signal(signal.SIGTERM)
    code = _exit_code(first, EXIT_SECONDS)
    ended = datetime.now(UTC)
    _kept(pool, f"{key}-worker-1", first, code)
    if child is None:
        return first.pid, started, ended, f"the job did not start within {START_SECONDS:g}s"
    try:
        os.kill(child, signal.SIGKILL)  # a child that outlived its worker must not run on
    except ProcessLookupError:
        gone = True
    else:
        gone = False
    # The job's next attempt, by a worker that exits after one job.
    second = _worker(pool, f"{key}-worker-2", "--max-jobs", "1")
    try:
        code_2 = second.wait(START_SECONDS)
    except subprocess.TimeoutExpired:
        second.send_signal(signal.SIGTERM)
        code_2 = _exit_code(second, EXIT_SECONDS)
    _kept(pool, f"{key}-worker-2", second, code_2)
    outcome = "was killed with it" if gone else "outlived it"
    return (child if gone else first.pid), started, ended, f"worker exited {code}; its child {outcome}"


def _worker(pool: Pool, name: str, *args: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, str(ROOT / "manage.py"), "runworker", "-v", "1", "--pool", "process"]
    with (pool.log_dir / f"{name}.log").open("ab") as log:
        return subprocess.Popen(  # noqa: S603
            [*command, "--concurrency", "1", "--queue", "stubborn", *args],
            cwd=ROOT,
            env=pool.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _first_start(url: str, key: str, worker: subprocess.Popen[bytes]) -> int | None:
    """The pid of the child running the job's first attempt, once it started; None if it did not."""
    deadline = time.monotonic() + START_SECONDS
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline and worker.poll() is None:
            row = conn.execute(FIRST_START, [key]).fetchone()
            if row is not None:
                return int(row[0])
            time.sleep(0.1)
    return None


def _exit_code(process: subprocess.Popen[bytes], timeout: float) -> int:
    """How ``process`` exited within ``timeout`` seconds; -9 once SIGKILLed past it."""
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def _kept(pool: Pool, name: str, process: subprocess.Popen[bytes], code: int) -> None:
    """Keep the exit as a SIGTERM stop of the harness: anything but code 0 is a violation."""
    with pool.lock:
        pool.exits.append(Exit(name, process.pid, code, killed_by_harness=True, stopped=True))
