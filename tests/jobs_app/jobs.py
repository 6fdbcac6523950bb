"""Test jobs. Each records an Execution row first, so tests count real runs."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from django.db import connection

from django_jobretry import FatalError, RetryableError, RetryPolicy, current_job, job
from tests.jobs_app.models import Execution

# The limited jobs register with these; bench/limits.py leaves them out (=0) to measure a
# worker with no limit declared.
if os.environ.get("JOBRETRY_TEST_LIMITS", "1") == "1":
    from tests.jobs_app import limited_jobs  # noqa: F401
from tests.jobs_app import (  # noqa: F401  (registered for workers too)
    async_jobs,
    flow_jobs,
    progress_jobs,
    recipe_jobs,
    result_jobs,
    unique_jobs,
)

# A test of a worker signalled while it starts (test_worker_processes) holds
# the worker here, in the middle of Django's start-up, until it has signalled.
if gate := os.environ.get("JOBRETRY_TEST_STARTUP_GATE"):
    Path(f"{gate}.reached").touch()
    give_up = time.monotonic() + 30
    while not Path(f"{gate}.open").exists() and time.monotonic() < give_up:
        time.sleep(0.01)


def _record(key: str) -> int:
    context = current_job()
    attempt = context.attempt if context else 0
    Execution.objects.create(key=key, attempt=attempt, pid=os.getpid())
    return Execution.objects.filter(key=key).count()


@job(policy="three")
def record(key: str) -> None:
    _record(key)


@job(policy="three")
def record_connect_options(key: str) -> None:
    """Records ``KEY:N``, N the connect defaults its connection has.

    For tests/integration/conf/test_connect_options.py.
    """
    from django_jobretry.conf.databases import CONNECT_DEFAULTS

    connection.ensure_connection()
    params = connection.connection.info.get_parameters()
    have = [name for name, value in CONNECT_DEFAULTS.items() if params.get(name) == str(value)]
    _record(f"{key}:{len(have)}")


@job(policy="three")
def flaky(key: str, failures: int) -> None:
    if _record(key) <= failures:
        raise RetryableError(f"flaky failure for {key}")


@job(policy="three")
def always_fails(key: str) -> None:
    _record(key)
    raise ConnectionResetError(f"upstream reset for {key}")


@job(policy="three")
def fatal(key: str) -> None:
    _record(key)
    raise FatalError(f"payload for {key} is invalid")


@job(policy="three")
def sleepy(key: str, seconds: float) -> None:
    _record(key)
    time.sleep(seconds)


@job(policy="three", timeout=1)
def sleepy_limited(key: str, seconds: float) -> None:
    """Sleeps past its 1 s time limit: for the process pool, which kills it."""
    _record(key)
    time.sleep(seconds)


@job(policy="three")
def exits_process(key: str) -> None:
    """Ends its own process, as a segfault would: only ever run in the process pool."""
    _record(key)
    os._exit(3)


@job(policy="three", queue_name="other")
def other_queue(key: str) -> None:
    _record(key)


@job
def noop() -> None:
    """Does nothing: for throughput and claim tests."""


@job(policy="three")
def takes_anything(*args: object, **kwargs: object) -> None:
    """Accepts any arguments: for the enqueue validation tests."""


#: One attempt, then dead - and one automatic requeue, spent after 10 ms.
BUDGETED = RetryPolicy(max_attempts=1, base_delay=0.01, max_delay=0.01, jitter=0, requeue_budget=1)


@job(policy=BUDGETED)
def budgeted(key: str, fatal: bool = False) -> None:
    _record(key)
    if fatal:
        raise FatalError(f"payload of {key} is invalid")
    raise ConnectionResetError(f"still down: {key}")


@job(policy="three")
def forks_and_exits(key: str) -> None:
    """Starts a helper that inherits every inheritable descriptor, then ends its own process."""
    _record(key)
    # Not the standard streams: the test reads the worker's output to its end.
    quiet = subprocess.DEVNULL
    helper = subprocess.Popen(["sleep", "600"], close_fds=False, stdin=quiet, stdout=quiet, stderr=quiet)  # noqa: S607
    Execution.objects.create(key=f"{key}-helper", attempt=0, pid=helper.pid)
    os._exit(1)


@job(policy="three", timeout=1)
def sleeps_in_sql(key: str) -> None:
    """A statement far past its 1 s time limit: for the process pool, which kills the handler."""
    _record(key)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(600)")


@job(policy="three")
def ignores_sigterm(key: str, seconds: float) -> None:
    """On its first attempt, ignores SIGTERM and sleeps: only ever run in the process pool."""
    if _record(key) == 1:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(seconds)


@job(policy="three")
def record_run() -> None:
    """A schedule's run: records itself under its job id, so a test counts runs per slot."""
    context = current_job()
    _record(f"run-{context.job_id if context else 0}")


#: A scheduled run's retries, which its next slot stops long before the attempts run out.
UNTIL_NEXT_SLOT = RetryPolicy(max_attempts=1000, base_delay=0.2, multiplier=1, max_delay=0.2, jitter=0)


@job(policy=UNTIL_NEXT_SLOT)
def always_fails_retryably() -> None:
    """A schedule's run that never succeeds: its retries go on until its schedule's next slot."""
    _record(f"doomed-{current_job().job_id if current_job() else 0}")
    raise RetryableError("the partner is down")


# -- a downstream the outage tests (test_outages_processes.py) break and mend with flag rows --------
#: While an Execution row of this key exists, every call to the downstream fails.
DOWNSTREAM_DOWN = "downstream-down"
#: While one of this key exists, a call hangs until it is removed (or 60 s pass).
DOWNSTREAM_HANGS = "downstream-hangs"


def _call_downstream(key: str) -> None:
    """Records ``KEY:hung`` / ``KEY:down`` for a call that hung / failed, ``KEY`` for one that succeeded."""
    if Execution.objects.filter(key=DOWNSTREAM_HANGS).exists():
        _record(f"{key}:hung")
        give_up = time.monotonic() + 60
        while Execution.objects.filter(key=DOWNSTREAM_HANGS).exists() and time.monotonic() < give_up:
            time.sleep(0.02)
    if Execution.objects.filter(key=DOWNSTREAM_DOWN).exists():
        _record(f"{key}:down")
        raise ConnectionResetError(f"downstream is down: {key}")
    _record(key)


#: Fast retries, and a breaker that opens after 3 failures and probes within a second.
GUARDED = RetryPolicy(
    max_attempts=6,
    base_delay=0.05,
    multiplier=2,
    max_delay=0.2,
    jitter=0,
    circuit={"failures": 3, "window": 60, "cooldown": 0.3, "max_cooldown": 1.2, "release_per_second": 200},
)
#: The same retries with no breaker.
BARE = RetryPolicy(max_attempts=6, base_delay=0.05, multiplier=2, max_delay=0.2, jitter=0)


@job(policy=GUARDED)
def guarded_call(key: str) -> None:
    _call_downstream(key)


@job(policy=BARE)
def bare_call(key: str) -> None:
    _call_downstream(key)
