"""Test settings: the example project, importable without a database for pure tests.

Without DATABASE_URL the pure tests still run; tests that need the database
are stopped by tests/conftest.py with a message instead of a connection error.
"""

import json
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
# Test modules define jobs of their own, which in-process workers run; a real
# worker would not import them (check E015), and none runs them here.
SILENCED_SYSTEM_CHECKS = ["django_jobretry.E015"]
LOGGING = {"version": 1, "disable_existing_loggers": False}

INSTALLED_APPS = [
    *INSTALLED_APPS,  # noqa: F405
    "tests.jobs_app",
    # The django-q2 adapter, after django_q and django_jobretry (tests/integration/django_q2/).
    "django_q",
    "django_jobretry.contrib.django_q2",
]

# django-q2 freezes Q_CLUSTER when first imported: every test and every qcluster
# subprocess (started with these settings) shares these values. The ORM broker
# on the test database; short timeout/retry so a lost delivery shows up quickly.
Q_CLUSTER = {
    "name": "jobretry-tests",
    "orm": "default",
    "workers": 2,
    "timeout": 3,
    "retry": 6,
    "max_attempts": 0,
    "poll": 0.1,
    "catch_up": False,
    "save_limit": 0,
    "log_level": "INFO",
}

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
        # django-q2 tasks (tests/jobs_app/q2_tasks.py): delays that grow 0.5 -> 1.5 s, no jitter.
        "q2": {"max_attempts": 3, "base_delay": 0.5, "multiplier": 3, "max_delay": 5, "jitter": 0},
        "q2-two": {"max_attempts": 2, "base_delay": 0.2, "multiplier": 1, "max_delay": 0.2, "jitter": 0},
    },
    # Worker processes of the schedule tests (test_schedules_processes.py) get theirs as JSON.
    "SCHEDULES": json.loads(os.environ.get("JOBRETRY_TEST_SCHEDULES", "{}")),
    # Tests that prove LISTEN/NOTIFY wakes a worker raise this so polling cannot.
    "POLL_SECONDS": float(os.environ.get("JOBRETRY_TEST_POLL_SECONDS", "0.05")),
    "DJANGO_Q2": {"POLICY": "q2"},
    # Worker processes of the middleware tests (test_middleware_workers.py) get theirs as JSON.
    "MIDDLEWARE": json.loads(os.environ.get("JOBRETRY_TEST_MIDDLEWARE", "[]")),
}

if django.VERSION >= (6, 1):
    # Tasks declared with @task(policy=..., timeout=..., unique_args=...), which Django 6.1's task()
    # passes to JobRetryBackend: workers import their module at start-up, as a project lists its own.
    JOBRETRY["TASK_MODULES"] = ["tests.jobs_app.task_options"]
