"""Test settings: the example project, importable without a database for pure tests.

Without DATABASE_URL the pure tests still run; tests that need the database
are stopped by tests/conftest.py with a message instead of a connection error.
"""

import os

import django

_url = os.environ.get("DATABASE_URL")
# The example settings insist on DATABASE_URL; lend them a placeholder that is
# never connected to, and leave the environment as it was for subprocesses.
os.environ["DATABASE_URL"] = _url or "postgres://not-configured@localhost/DATABASE_URL-is-not-set"
try:
    from example_project.settings import *  # noqa: F403
finally:
    if _url is None:
        del os.environ["DATABASE_URL"]

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}

INSTALLED_APPS = [*INSTALLED_APPS, "tests.jobs_app"]  # noqa: F405

if django.VERSION >= (6, 0):
    # django.tasks through our backend: tests/jobs_app/tasks.py is discovered like jobs.py.
    TASKS = {
        "default": {
            "BACKEND": "django_jobretry.backends.JobRetryBackend",
            "QUEUES": ["default", "other"],
            "OPTIONS": {"policy": "three"},
        }
    }

JOBRETRY = {
    **JOBRETRY,  # noqa: F405
    "POLICIES": {
        **JOBRETRY["POLICIES"],  # noqa: F405
        # Fast and jitter-free so retries are due almost at once in tests.
        "three": {"max_attempts": 3, "base_delay": 0.01, "multiplier": 2, "max_delay": 0.05, "jitter": 0},
    },
    # Tests that prove LISTEN/NOTIFY wakes a worker raise this so polling cannot.
    "POLL_SECONDS": float(os.environ.get("JOBRETRY_TEST_POLL_SECONDS", "0.05")),
}
