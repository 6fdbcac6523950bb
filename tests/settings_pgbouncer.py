"""Settings of processes behind PgBouncer (tests/pgbouncer.py): the test settings, two aliases.

- ``default`` goes through PgBouncer in transaction pooling mode
  (``JOBRETRY_PGBOUNCER_URL``), marked the way Django's documentation asks
  for such a pooler: ``DISABLE_SERVER_SIDE_CURSORS = True``.
- ``direct`` connects straight to the test database (``DATABASE_URL``).

``JOBRETRY_TEST_LISTEN`` says where the worker LISTENs: ``direct`` (the
configuration docs/worker.md#pgbouncer recommends), ``pooled`` (through
PgBouncer: check W002 warns that nothing arrives) or ``off``. Each alias
names itself in ``application_name``, so a test can tell the sessions apart.
"""

import os

from example_project.database import database_from_url
from tests.settings import *  # noqa: F403
from tests.settings import JOBRETRY

DATABASES = {
    "default": {
        **database_from_url(os.environ["JOBRETRY_PGBOUNCER_URL"]),
        "DISABLE_SERVER_SIDE_CURSORS": True,
        "OPTIONS": {"application_name": "jobretry-through-pgbouncer"},
    },
    "direct": {**database_from_url(), "OPTIONS": {"application_name": "jobretry-direct"}},
}

_listen = os.environ.get("JOBRETRY_TEST_LISTEN", "direct")
JOBRETRY = {
    **JOBRETRY,
    "LISTEN": _listen != "off",
    "LISTEN_DATABASE": "direct" if _listen == "direct" else None,
}
