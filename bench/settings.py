"""Benchmark settings: the test settings (with the `noop` job), polling at the library default.

tests.settings polls every 0.05 s so tests finish fast; the benchmark measures
what a deployment gets, so POLL_SECONDS is the library default (1.0 s) unless
BENCH_POLL_SECONDS says otherwise (bench/run.py --poll-seconds sets it for
the worker processes it starts). DEBUG stays the tests' (on) unless
BENCH_DEBUG=0: with DEBUG on, Django keeps each connection's last 9,000
statements, which bench/memory.py would otherwise measure as the worker's own.
"""

import os

from tests.settings import *  # noqa: F403

DEBUG = os.environ.get("BENCH_DEBUG", "1") != "0"

JOBRETRY = {
    **JOBRETRY,  # noqa: F405
    "POLL_SECONDS": float(os.environ.get("BENCH_POLL_SECONDS", "1.0")),
}
