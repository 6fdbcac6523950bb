"""The connect options our processes really connect with, read from their live connections.

Real `manage.py` processes on the test database. A receiver of Django's
``connection_created``, installed before Django starts, prints each new
connection's parameters as libpq holds them (``info.dsn``, never the
password): what the command or the worker got, not what a setting says.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import pytest
from psycopg.conninfo import conninfo_to_dict

from django_jobretry.conf.databases import CONNECT_DEFAULTS
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution
from tests.manage_py import manage_py
from tests.processes import test_database_url

PRELUDE = """
import json, sys
from django.db.backends.signals import connection_created

def report(sender, connection, **kwargs):
    # One write: print() writes the line and its end apart, and another thread's log line may land between.
    sys.stderr.write("CONNECTED " + json.dumps(connection.connection.info.dsn) + "\\n")
    sys.stderr.flush()

connection_created.connect(report, weak=False)
"""

#: The parameters the defaults are about, as libpq writes them back.
EXPECTED = {name: str(value) for name, value in CONNECT_DEFAULTS.items()}

pytestmark = pytest.mark.django_db(transaction=True)


def connected_with(
    *args: str, options: Mapping[str, object] | None = None, **env: str
) -> list[dict[str, str]]:
    """Run `manage.py ARGS`; the parameters of each connection it opened (of CONNECT_DEFAULTS' names)."""
    result = manage_py(
        *args,
        prelude=PRELUDE,
        env={
            "DATABASE_URL": test_database_url(),
            "DJANGO_SETTINGS_MODULE": "tests.settings_connect",
            "JOBRETRY_TEST_DATABASE_OPTIONS": json.dumps(options or {}),
            **env,
        },
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = []
    for line in result.stderr.splitlines():
        if line.startswith("CONNECTED "):
            params = conninfo_to_dict(json.loads(line.removeprefix("CONNECTED ")))
            found.append({name: str(params[name]) for name in EXPECTED if name in params})
    assert found, result.stderr[-3000:]
    return found


def test_a_command_connects_with_the_defaults() -> None:
    assert connected_with("jobstatus") == [EXPECTED]


def test_every_connection_of_the_worker_has_them() -> None:
    """The main loop's, the heartbeat's and the job threads' connections alike."""
    found = connected_with("runworker", "--burst", "--concurrency", "2")
    assert found == [EXPECTED] * len(found)


def test_the_process_pools_children_have_them_too() -> None:
    """A child is a fresh interpreter: it has the defaults because it has its worker's ``sys.argv``."""
    jobs.record_connect_options.enqueue("child")
    result = manage_py(
        "runworker",
        "--burst",
        "--pool",
        "process",
        env={"DATABASE_URL": test_database_url(), "DJANGO_SETTINGS_MODULE": "tests.settings"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    [(key, pid)] = Execution.objects.values_list("key", "pid")
    assert key == f"child:{len(CONNECT_DEFAULTS)}"
    assert pid != os.getpid()


def test_the_projects_own_values_win() -> None:
    options = {"keepalives": 0, "connect_timeout": 30, "tcp_user_timeout": 0}
    assert connected_with("jobstatus", options=options) == [
        {**EXPECTED, **{k: str(v) for k, v in options.items()}}
    ]


def test_pgconnect_timeout_in_the_environment_wins() -> None:
    assert connected_with("prunejobs", "--dry-run", PGCONNECT_TIMEOUT="17") == [
        {**EXPECTED, "connect_timeout": "17"}
    ]


def test_other_processes_keep_the_projects_settings() -> None:
    """A web process, a shell, django-q2's cluster: not ours (docs/decisions/0011-*.md says why)."""
    found = connected_with("shell", "-c", "from django.db import connection; connection.ensure_connection()")
    assert found == [{}]
