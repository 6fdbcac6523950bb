"""PostgreSQL only: `check` says so before `migrate` runs, and the first migration refuses.

The claims (``SELECT ... FOR UPDATE SKIP LOCKED``), LISTEN/NOTIFY, the
partial indexes built ``CONCURRENTLY`` and the fenced updates exist only on
PostgreSQL. On another engine the migrations used to apply half of the
schema and crash in the middle; now check E013 stops ``migrate`` first, and
the guard that opens ``0001_initial`` stops a ``migrate --skip-checks``
before any table of ours exists (nothing is recorded in django_migrations).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig, apps
from django.core.checks import CheckMessage, Error, Tags, register
from django.core.management.base import CommandError
from django.db import connections, migrations, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import ProjectState

APP_LABEL = "django_jobretry"
#: What Django's PostgreSQL backend (and every backend built on it) calls its vendor.
VENDOR = "postgresql"
ENGINE = "django.db.backends.postgresql"


def engine_problem(wrapper: BaseDatabaseWrapper) -> str | None:
    """Why the database behind ``wrapper`` cannot hold our tables, or None when it is PostgreSQL."""
    if wrapper.vendor == VENDOR:
        return None
    engine = wrapper.settings_dict.get("ENGINE")
    return (
        f"DATABASES[{wrapper.alias!r}] holds the django_jobretry tables but uses ENGINE {engine!r} "
        f"({wrapper.display_name}); django-jobretry needs PostgreSQL: its workers claim jobs with "
        "SELECT ... FOR UPDATE SKIP LOCKED, wake up with LISTEN/NOTIFY, and its migrations build "
        "indexes CONCURRENTLY."
    )


def fix(alias: str) -> str:
    """The hint: what to change in settings (self-contained; the message says why)."""
    return (
        f'Set DATABASES["{alias}"]["ENGINE"] = "{ENGINE}" (psycopg comes with django-jobretry), or route '
        'the "django_jobretry" app to a PostgreSQL alias with a database router (DATABASE_ROUTERS: '
        "db_for_read, db_for_write and allow_migrate); then run manage.py migrate."
    )


def holding_aliases() -> list[str]:
    """The DATABASES aliases the router sends our models' reads and writes to (usually just "default")."""
    models = apps.get_app_config(APP_LABEL).get_models()
    found = {router.db_for_write(model) for model in models} | {router.db_for_read(model) for model in models}
    return sorted(found)


@register(Tags.models)
def check_database_engine(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """E013: the database our tables live in is not PostgreSQL (read from settings; no connection)."""
    if app_configs is not None and not any(config.label == APP_LABEL for config in app_configs):
        return []
    # An alias DATABASES does not have is Django's to report (the router's own mistake), not ours.
    aliases = [alias for alias in holding_aliases() if alias in connections.settings]
    found = [(alias, engine_problem(connections[alias])) for alias in aliases]
    return [Error(why, hint=fix(alias), id="django_jobretry.E013") for alias, why in found if why is not None]


class RequirePostgreSQL(migrations.operations.base.Operation):
    """The first operation of 0001_initial: on another engine, stop before anything is created.

    It changes no state, so ``makemigrations`` never sees it. A database the
    router does not migrate our app to is left alone, as every operation does.
    """

    reversible = True
    reduces_to_sql = True  # no SQL on PostgreSQL, so sqlmigrate has nothing to warn about

    def state_forwards(self, app_label: str, state: ProjectState) -> None:
        pass

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        wrapper = schema_editor.connection
        if not router.allow_migrate(wrapper.alias, app_label):
            return
        why = engine_problem(wrapper)
        if why is not None:
            # A CommandError: `migrate` prints one line instead of a traceback; nothing was applied.
            raise CommandError(
                f"django_jobretry.E013: {why} {fix(wrapper.alias)} Nothing of django_jobretry was migrated."
            )

    def database_backwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        pass

    def describe(self) -> str:
        return "Check that the database is PostgreSQL"
