"""PostgreSQL only: check E013 before `migrate`, and a first migration that refuses other engines.

Each test is a new site on a real SQLite file (tests/settings_sqlite.py), run
as an operator runs it: `manage.py` in a subprocess. No PostgreSQL is needed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.manage_py import manage_py

SETTINGS = "tests.settings_sqlite"


def run(tmp_path: Path, *args: str, route: str = "") -> tuple[int, str, str]:
    env = {
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "JOBRETRY_TEST_SQLITE": str(tmp_path / "site.sqlite3"),
        "JOBRETRY_TEST_ROUTE_JOBS": route,
    }
    done = manage_py(*args, env=env)
    return done.returncode, done.stdout, done.stderr


def ours(path: Path) -> tuple[list[str], list[str]]:
    """django_jobretry's tables, and its rows in django_migrations, in one SQLite file."""
    with sqlite3.connect(path) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        applied = (
            [row[0] for row in db.execute("SELECT name FROM django_migrations WHERE app = 'django_jobretry'")]
            if "django_migrations" in tables
            else []
        )
    return [name for name in tables if name.startswith("django_jobretry")], applied


def test_check_names_the_alias_and_the_engine(tmp_path: Path) -> None:
    code, _, err = run(tmp_path, "check")
    assert code == 1
    assert "(django_jobretry.E013) DATABASES['default'] holds the django_jobretry tables but uses " in err
    assert "ENGINE 'django.db.backends.sqlite3' (SQLite)" in err
    assert 'HINT: Set DATABASES["default"]["ENGINE"] = "django.db.backends.postgresql"' in err
    assert "Traceback" not in err


def test_check_finds_it_under_the_models_tag(tmp_path: Path) -> None:
    code, _, err = run(tmp_path, "check", "--tag", "models")
    assert (code, "django_jobretry.E013" in err) == (1, True)


def test_migrate_stops_at_the_check_before_any_migration(tmp_path: Path) -> None:
    code, out, err = run(tmp_path, "migrate")
    assert code == 1
    assert "django_jobretry.E013" in err
    assert "Applying" not in out
    assert not (tmp_path / "site.sqlite3").exists() or ours(tmp_path / "site.sqlite3") == ([], [])


def test_migrate_without_checks_refuses_in_the_first_migration_and_leaves_nothing(tmp_path: Path) -> None:
    code, out, err = run(tmp_path, "migrate", "--skip-checks")
    assert code == 1
    assert "Applying auth.0001_initial... OK" in out, "the other apps migrate as usual"
    assert err.startswith("CommandError: django_jobretry.E013: DATABASES['default']")
    assert "Nothing of django_jobretry was migrated." in err
    assert "Traceback" not in err
    assert ours(tmp_path / "site.sqlite3") == ([], [])


def test_an_alias_routed_to_postgresql_passes(tmp_path: Path) -> None:
    """The router's database for our models is what counts, not "default" (never connected to here)."""
    code, out, err = run(tmp_path, "check", route="postgresql")
    assert (code, err) == (0, "")
    assert "no issues" in out
    code, out, err = run(tmp_path, "migrate", "--database", "default", route="postgresql")
    assert (code, err) == (0, "")
    assert ours(tmp_path / "site.sqlite3")[0] == [], "the router keeps our tables off SQLite"


@pytest.mark.parametrize("args", [("check",), ("migrate", "--database", "jobs", "--skip-checks")])
def test_an_alias_routed_to_sqlite_is_named(tmp_path: Path, args: tuple[str, ...]) -> None:
    code, _, err = run(tmp_path, *args, route="sqlite")
    assert code == 1
    assert "DATABASES['jobs'] holds the django_jobretry tables" in err
    if args[0] == "migrate":
        assert ours(Path(f"{tmp_path / 'site.sqlite3'}.jobs")) == ([], [])
