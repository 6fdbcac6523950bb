"""Benchmark settings: the test settings (with the `noop` job), polling at the library default.

tests.settings polls every 0.05 s so tests finish fast; the benchmark measures
what a deployment gets, so POLL_SECONDS is the library default (1.0 s) unless
BENCH_POLL_SECONDS says otherwise (bench/run.py --poll-seconds sets it for
the worker processes it starts).
"""

import os

from tests.settings import *  # noqa: F403

JOBRETRY = {
    **JOBRETRY,  # noqa: F405
    "POLL_SECONDS": float(os.environ.get("BENCH_POLL_SECONDS", "1.0")),
}
