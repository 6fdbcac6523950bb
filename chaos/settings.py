"""Settings of every chaos process: the test settings, the chaos jobs, and a short lease.

The lease is short so a pause "past the lease" takes seconds, not minutes.
Each process names its PostgreSQL sessions ``chaos-<pid>`` so the harness can
terminate the sessions of one worker and later tell which worker a fault hit.
"""

import os

from tests.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "chaos"]  # noqa: F405

DATABASES = {
    "default": {
        **DATABASES["default"],  # noqa: F405
        "OPTIONS": {**DATABASES["default"].get("OPTIONS", {}), "application_name": f"chaos-{os.getpid()}"},  # noqa: F405
    }
}

#: Seconds a claimed job may go without a heartbeat (heartbeats come every third of it).
LEASE_SECONDS = 3

JOBRETRY = {
    **JOBRETRY,  # noqa: F405
    "POLICIES": {
        **JOBRETRY["POLICIES"],  # noqa: F405
        # Jittered so the retry-delay invariant checks a real band, short so runs end.
        "chaos": {"max_attempts": 5, "base_delay": 0.2, "multiplier": 2, "max_delay": 2, "jitter": 0.5},
        # The poison job kills three workers, then is a lease_expired dead letter.
        "poison": {"max_attempts": 3, "base_delay": 0.5, "multiplier": 2, "max_delay": 2, "jitter": 0.25},
    },
    "LEASE_SECONDS": LEASE_SECONDS,
    "POLL_SECONDS": 0.2,
    "SHUTDOWN_TIMEOUT_SECONDS": 5,
    "LOCK_TIMEOUT_MS": 1000,
    "STATEMENT_TIMEOUT_MS": 5000,
}
