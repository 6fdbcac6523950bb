"""A new site on Django's default database, SQLite: what `check` and `migrate` say to it.

The SQLite file is JOBRETRY_TEST_SQLITE (tests/integration/conf/test_database_engine.py
gives each test its own). JOBRETRY_TEST_ROUTE_JOBS routes django_jobretry's models
to the alias "jobs": "postgresql" (never connected to) or "sqlite" (a second file).
"""

import os

SECRET_KEY = "tests-only"  # noqa: S105 - a test settings module
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_jobretry",
]
_sqlite = os.environ["JOBRETRY_TEST_SQLITE"]
_jobs = {
    "postgresql": {"ENGINE": "django.db.backends.postgresql", "NAME": "never-connected"},
    "sqlite": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{_sqlite}.jobs"},
}
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": _sqlite}}
if os.environ.get("JOBRETRY_TEST_ROUTE_JOBS"):
    DATABASES["jobs"] = _jobs[os.environ["JOBRETRY_TEST_ROUTE_JOBS"]]
    DATABASE_ROUTERS = ["tests.settings_sqlite.JobsApart"]


class JobsApart:
    """Reads, writes and migrations of django_jobretry go to "jobs"; everything else to "default"."""

    def db_for_read(self, model: type, **hints: object) -> str | None:
        return "jobs" if model._meta.app_label == "django_jobretry" else None  # type: ignore[attr-defined]

    db_for_write = db_for_read

    def allow_migrate(self, db: str, app_label: str, **hints: object) -> bool:
        return (db == "jobs") == (app_label == "django_jobretry")
