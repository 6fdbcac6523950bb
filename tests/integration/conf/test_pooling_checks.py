"""LISTEN, LISTEN_DATABASE and transaction pooling: the checks, the settings, what the worker does.

The checks (E012, W002, W003) read DATABASES; these tests add entries to it
with monkeypatch, and never connect to them.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from django_jobretry.conf.checks import check_settings
from django_jobretry.conf.databases import check_listen_database, check_transaction_pooling, listen_alias
from django_jobretry.worker.lifecycle import WorkerOptions
from django_jobretry.worker.session import apply_timeouts

DIRECT = {"ENGINE": "django.db.backends.postgresql", "NAME": "app", "HOST": "db.internal", "PORT": "5432"}


def ids(messages: list[Any]) -> list[str]:
    return [message.id for message in messages]


@pytest.fixture
def pooled_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """DATABASES["default"] marked as PgBouncer transaction pooling, as Django's docs ask."""
    monkeypatch.setitem(settings.DATABASES["default"], "DISABLE_SERVER_SIDE_CURSORS", True)


@pytest.mark.parametrize(
    ("jobretry", "shown"),
    [
        ({"LISTEN": "no"}, "JOBRETRY[\"LISTEN\"] = 'no' is invalid: expected True or False."),
        ({"LISTEN_DATABASE": 5}, 'JOBRETRY["LISTEN_DATABASE"] = 5 is invalid'),
        ({"LISTEN_DATABASE": ""}, "JOBRETRY[\"LISTEN_DATABASE\"] = '' is invalid"),
    ],
)
def test_e012_listen_settings_of_the_wrong_type(jobretry: dict[str, Any], shown: str) -> None:
    with override_settings(JOBRETRY=jobretry):
        (error,) = check_settings()
    assert error.id == "django_jobretry.E012"
    assert shown in error.msg


def test_e012_an_alias_databases_does_not_have(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(settings.DATABASES, "direct", DIRECT)
    with override_settings(JOBRETRY={"LISTEN_DATABASE": "drect"}):
        (error,) = check_listen_database()
    assert error.id == "django_jobretry.E012"
    assert "JOBRETRY[\"LISTEN_DATABASE\"] = 'drect' is not in DATABASES. Did you mean 'direct'?" in error.msg


def test_e012_an_alias_that_is_not_postgresql(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        settings.DATABASES, "side", {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    )
    with override_settings(JOBRETRY={"LISTEN_DATABASE": "side"}):
        (error,) = check_listen_database()
    assert error.id == "django_jobretry.E012"
    assert "'django.db.backends.sqlite3'; only PostgreSQL has LISTEN/NOTIFY" in error.msg


def test_manage_py_check_names_the_bad_key() -> None:
    with (
        override_settings(JOBRETRY={"LISTEN_DATABASE": "nowhere"}),
        pytest.raises(SystemCheckError) as raised,
    ):
        call_command("check")
    assert "django_jobretry.E012" in str(raised.value)
    assert "JOBRETRY[\"LISTEN_DATABASE\"] = 'nowhere'" in str(raised.value)


def test_a_direct_alias_and_no_pooling_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(settings.DATABASES, "direct", DIRECT)
    with override_settings(JOBRETRY={"LISTEN_DATABASE": "direct"}):
        assert check_listen_database() == []
        assert check_transaction_pooling() == []
        assert listen_alias() == "direct"


def test_w002_and_w003_behind_a_transaction_pooler(pooled_default: None) -> None:
    with override_settings(JOBRETRY={}):
        found = check_transaction_pooling()
    assert ids(found) == ["django_jobretry.W002", "django_jobretry.W003"]
    assert "LISTEN on the DATABASES alias 'default'" in found[0].msg
    assert 'JOBRETRY["LISTEN_DATABASE"]' in found[0].hint
    assert "statement_timeout, lock_timeout, idle_in_transaction_session_timeout" in found[1].msg
    assert "ALTER ROLE" in found[1].hint


def test_a_direct_listener_or_polling_silences_w002(
    pooled_default: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(settings.DATABASES, "direct", DIRECT)
    for jobretry in ({"LISTEN_DATABASE": "direct"}, {"LISTEN": False}):
        with override_settings(JOBRETRY=jobretry):
            assert ids(check_transaction_pooling()) == ["django_jobretry.W003"]


def test_listen_setting_is_the_default_of_worker_options() -> None:
    assert WorkerOptions().listen is True
    with override_settings(JOBRETRY={"LISTEN": False}):
        assert WorkerOptions().listen is False
        assert listen_alias() is None


class Recording:
    """A stand-in for a Django connection that records the SQL it is given."""

    def __init__(self, pooled: bool) -> None:
        self.alias = "default"
        self.settings_dict = {"DISABLE_SERVER_SIDE_CURSORS": pooled}
        self.sql: list[str] = []

    def cursor(self) -> Any:
        recording = self

        class Cursor:
            def __enter__(self) -> Cursor:
                return self

            def __exit__(self, *exc: object) -> None:
                return None

            def execute(self, sql: str, params: object = None) -> None:
                recording.sql.append(sql)

        return Cursor()


def test_worker_timeouts_are_set_per_session_unless_the_alias_is_pooled() -> None:
    direct, pooled = Recording(pooled=False), Recording(pooled=True)
    apply_timeouts(direct)
    apply_timeouts(pooled)
    assert direct.sql == ["SELECT set_config(%s, %s, false)"] * 3
    assert pooled.sql == []
