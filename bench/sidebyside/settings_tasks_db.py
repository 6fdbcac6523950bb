"""Settings of the django-tasks-db child and its ``db_worker`` processes: only that backend.

Django's own task framework (``django.tasks``) with django-tasks-db's
DatabaseBackend on DATABASE_URL; DEBUG off (``db_worker --reload`` defaults to
DEBUG) and persistent connections (the worker calls ``close_old_connections()``
around every task, which at CONN_MAX_AGE 0 would reconnect each time).
"""

from example_project.database import database_from_url

SECRET_KEY = "bench-not-secret"  # noqa: S105 - a benchmark, never deployed
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["django_tasks_db"]
DATABASES = {"default": {**database_from_url(), "CONN_MAX_AGE": 60}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
LOGGING = {"version": 1, "disable_existing_loggers": False}
