"""Settings of the example site; the database comes from DATABASE_URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import django

from example_project.database import database_from_url

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "example-project-not-secret"  # noqa: S105 - a local demo site, never deployed
DEBUG = True
ALLOWED_HOSTS = ["localhost", "127.0.0.1"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_jobretry",
    "example_project.shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

DATABASES = {"default": database_from_url()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"

JOBRETRY: dict[str, Any] = {
    "POLICIES": {
        # Production-like: the built-in default (20 attempts over about a day).
        "default": {},
        # Mail servers throttle: long gaps, and a mail later than 2 hours is
        # worse than none, so retry_for ends it before the 8 attempts do.
        "emails": {
            "max_attempts": 8,
            "base_delay": 60,
            "multiplier": 3,
            "max_delay": 3600,
            "jitter": 0.2,
            "retry_for": 2 * 3600,
            "fatal_errors": ["example_project.shop.errors.InvalidAddress"],
        },
        # The demo's: seconds instead of hours so a run finishes in a minute.
        "demo": {"max_attempts": 3, "base_delay": 0.2, "multiplier": 2, "max_delay": 1, "jitter": 0.1},
        # The demo's partner outage (docs/outages.md), in seconds as well. Alone, 4 attempts
        # last 1.5 s: a 3 s outage would kill every job. Three refused connections open the
        # task's breaker instead; it holds the task and probes after 1 s, then 2 s, 4 s.
        "partner": {
            "max_attempts": 4,
            "base_delay": 0.2,
            "multiplier": 2,
            "max_delay": 1,
            "jitter": 0.1,
            "circuit": {
                "failures": 3,
                "window": 10,
                "cooldown": 1,
                "max_cooldown": 4,
                "errors": ["builtins.ConnectionError"],
                "release_per_second": 20,
            },
        },
    },
}

if django.VERSION >= (6, 0):
    # Django's task framework through django-jobretry: shop/tasks.py runs on
    # runworker like the jobs (docs/django-tasks.md). Django 5.2 has no django.tasks.
    TASKS = {
        "default": {
            "BACKEND": "django_jobretry.backends.JobRetryBackend",
            "OPTIONS": {"policy": "default"},
        }
    }

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_jobretry": {"handlers": ["console"], "level": "INFO"}},
}
