"""Settings of the upstream contract run (devtools/upstream_contract.py): upstream's apps, our backend.

The apps are those django-tasks-db's own test settings install (its test
module imports its models and admin at the top), plus django_jobretry; the
default task backend is JobRetryBackend, as the test classes that read the
configured default backend expect. The database comes from DATABASE_URL.
"""

from __future__ import annotations

from typing import Any

from django.urls import URLPattern

from example_project.database import database_from_url

SECRET_KEY = "upstream-contract-not-secret"  # noqa: S105 - a throwaway test database, never deployed
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.messages",
    "django.contrib.sessions",
    "django.contrib.staticfiles",
    "django_tasks_db",
    "django_jobretry",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
ROOT_URLCONF = __name__
urlpatterns: list[URLPattern] = []
STATIC_URL = "static/"
DATABASES = {"default": database_from_url()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
LOGGING: dict[str, Any] = {"version": 1, "disable_existing_loggers": False}

TASKS = {"default": {"BACKEND": "django_jobretry.backends.JobRetryBackend"}}
JOBRETRY: dict[str, Any] = {"POLICIES": {"default": {}}}
# The upstream task modules are test fixtures that no worker of this run imports (check E015).
SILENCED_SYSTEM_CHECKS = ["django_jobretry.E015"]
