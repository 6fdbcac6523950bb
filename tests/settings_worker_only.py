"""Settings of a worker-only project: the test settings without a URL configuration.

Such a project (a settings module for `runworker` alone) has no ROOT_URLCONF;
every `manage.py` command runs the system checks, so a check that resolves
URLs must not assume one (tests/integration/conf/test_checks.py).
"""

from tests.settings import *  # noqa: F403

del ROOT_URLCONF  # noqa: F821
