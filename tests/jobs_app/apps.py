"""The test app; with JOBRETRY_TEST_OTEL set, a process gets the OpenTelemetry SDK at start-up.

Test processes install it from tests/conftest.py; a spawned ``runworker``
(and its ``--pool process`` children) only through this, as a project's
``AppConfig.ready()`` would (docs/tracing.md).
"""

import os

from django.apps import AppConfig


class JobsAppConfig(AppConfig):
    name = "tests.jobs_app"
    label = "jobs_app"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        if os.environ.get("JOBRETRY_TEST_OTEL"):
            from tests import otel_sdk

            otel_sdk.install()
