"""Which connect options our processes add, and which processes they are (conf/databases.py)."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.db.utils import ConnectionHandler

from django_jobretry.conf.databases import CONNECT_DEFAULTS, apply_connect_defaults, missing_defaults
from django_jobretry.management.cli import runs_our_command


def test_an_alias_without_options_gets_every_default() -> None:
    assert missing_defaults({}, {}) == dict(CONNECT_DEFAULTS)
    assert set(CONNECT_DEFAULTS) == {
        "connect_timeout",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
    }


def test_the_projects_own_values_win_zero_included() -> None:
    """0 is libpq's "off" (no keepalives, no user timeout, wait forever to connect): a choice, kept."""
    options = {"keepalives": 0, "tcp_user_timeout": 0, "connect_timeout": 30, "sslmode": "require"}
    assert missing_defaults(options, {}) == {
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
    }


def test_pgconnect_timeout_in_the_environment_wins_over_the_default() -> None:
    assert "connect_timeout" not in missing_defaults({}, {"PGCONNECT_TIMEOUT": "20"})
    assert missing_defaults({}, {"PGHOST": "db"}) == dict(CONNECT_DEFAULTS)


@pytest.mark.parametrize(
    "argv",
    [
        ["manage.py", "runworker", "--burst"],
        ["django-admin", "jobstatus"],
        ["manage.py", "deadletters", "list"],
        ["manage.py", "pause", "emails"],
        ["manage.py", "showpolicies"],
    ],
)
def test_our_commands_are_recognised(argv: list[str]) -> None:
    assert runs_our_command(argv)


@pytest.mark.parametrize(
    "argv",
    [["manage.py", "runserver"], ["gunicorn", "project.wsgi"], ["manage.py"], ["manage.py", "qcluster"], []],
)
def test_other_processes_are_left_alone(argv: list[str]) -> None:
    assert not runs_our_command(argv)


def test_an_alias_whose_backend_cannot_load_is_skipped_not_fatal() -> None:
    """A worker machine without, say, mysqlclient still starts when an unused alias needs it."""
    databases: dict[str, dict[str, Any]] = {
        "default": {"ENGINE": "django.db.backends.postgresql", "NAME": "jobs"},
        "reports": {"ENGINE": "no.such.backend", "NAME": "reports"},
        "local": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
    }
    handler = ConnectionHandler(databases)
    with mock.patch("django_jobretry.conf.databases.connections", handler):
        added = apply_connect_defaults(environ={})
    assert added == {"default": dict(CONNECT_DEFAULTS)}
    assert databases["default"]["OPTIONS"] == dict(CONNECT_DEFAULTS)
    assert "OPTIONS" not in databases["reports"] or not databases["reports"]["OPTIONS"]
