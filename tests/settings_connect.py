"""Test settings whose DATABASES["default"]["OPTIONS"] a test chooses: JSON in JOBRETRY_TEST_DATABASE_OPTIONS.

For the connect options our processes add (django_jobretry/conf/databases.py):
a project's own value must win, and a process must show which ones it used.
"""

import json
import os

from tests.settings import *  # noqa: F403
from tests.settings import DATABASES

DATABASES = {
    **DATABASES,
    "default": {
        **DATABASES["default"],
        "OPTIONS": json.loads(os.environ.get("JOBRETRY_TEST_DATABASE_OPTIONS", "{}")),
    },
}
