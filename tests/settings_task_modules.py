"""The test settings with E015 on, and the task modules of tests/integration/conf/test_task_modules.py.

JOBRETRY_TEST_TASK_MODULES: comma-separated JOBRETRY["TASK_MODULES"];
JOBRETRY_TEST_VIEWS: a URL configuration importing a view module with a job;
JOBRETRY_TEST_PARTNER: install an app whose @task names an undeclared queue.
Listing tests.task_modules.bad_option in TASK_MODULES imports a @task whose option is refused.
"""

import os

from tests.settings import *  # noqa: F403

SILENCED_SYSTEM_CHECKS = []
JOBRETRY = {
    **JOBRETRY,  # noqa: F405
    "TASK_MODULES": [name for name in os.environ.get("JOBRETRY_TEST_TASK_MODULES", "").split(",") if name],
}
if os.environ.get("JOBRETRY_TEST_VIEWS"):
    ROOT_URLCONF = "tests.task_modules.urls"
if os.environ.get("JOBRETRY_TEST_PARTNER"):
    INSTALLED_APPS = [*INSTALLED_APPS, "tests.task_modules.partner"]  # noqa: F405
