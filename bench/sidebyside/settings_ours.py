"""Settings of our child and workers: bench/settings.py plus this package's jobs and a 1 ms policy.

DEBUG off (the test settings have it on, which keeps every query in memory)
and persistent connections, as for every peer.
"""

from bench.settings import *  # noqa: F403

DEBUG = False
INSTALLED_APPS = [*INSTALLED_APPS, "bench.sidebyside"]  # noqa: F405
JOBRETRY = {
    **JOBRETRY,  # noqa: F405
    "POLICIES": {
        **JOBRETRY["POLICIES"],  # noqa: F405
        # Fail-twice-then-succeed: retry after 1 ms, no jitter.
        "bench-1ms": {
            "max_attempts": 5,
            "base_delay": 0.001,
            "multiplier": 1,
            "max_delay": 0.001,
            "jitter": 0,
        },
    },
}
DATABASES = {**DATABASES, "default": {**DATABASES["default"], "CONN_MAX_AGE": 60}}  # noqa: F405
