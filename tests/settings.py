"""Test settings: the example project, with a fixed JOBRETRY the tests rely on."""

from example_project.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}
