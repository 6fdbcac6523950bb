"""The chaos app: only so that the worker's registry imports chaos/jobs.py."""

from django.apps import AppConfig


class ChaosConfig(AppConfig):
    name = "chaos"
    label = "chaos"
    default_auto_field = "django.db.models.BigAutoField"
