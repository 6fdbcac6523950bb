"""Workers behind a transaction pooler (PgBouncer ``pool_mode = transaction``).

Such a pooler hands each transaction to whichever server connection is free,
so anything that lives in a *session* does not follow the client
(docs/worker.md#pgbouncer):

- ``LISTEN`` registers the server connection, not the client: notifications
  reach some other client or none. The worker's LISTEN connection therefore
  has an alias of its own, ``JOBRETRY["LISTEN_DATABASE"]``, which should
  connect straight to PostgreSQL; ``JOBRETRY["LISTEN"] = False`` turns
  LISTEN off and the worker polls (docs/design.md#rule-9).
- A session ``SET`` (the worker's timeouts, docs/design.md#rule-8) stays on
  the server connection and leaks into the next client's transactions, while
  the worker's own next statement may run elsewhere without it. On a pooled
  alias the worker does not set them (worker/session.py); they belong to the
  role the workers log in as (``ALTER ROLE ... SET``).

An alias is taken to be transaction-pooled when its DATABASES entry has
``DISABLE_SERVER_SIDE_CURSORS = True``: Django's documentation requires
exactly that flag for such a pooler. Prepared statements (``prepare_threshold``,
off in Django by default) and advisory locks are not used by the worker; the
counters append a row per statement, which needs no session either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.db import DEFAULT_DB_ALIAS

from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.schema import validate
from django_jobretry.display import did_you_mean

#: The engines whose connections can LISTEN (Django's PostgreSQL backend and subclasses of it).
POSTGRESQL = "django.db.backends.postgresql"


def listen_alias() -> str | None:
    """The DATABASES alias the worker's LISTEN connection uses; None when LISTEN is off."""
    if not jobretry_settings.listen:
        return None
    return jobretry_settings.listen_database or DEFAULT_DB_ALIAS


def transaction_pooled(alias: str) -> bool:
    """Whether DATABASES[alias] is marked as going through a transaction pooler."""
    entry = settings.DATABASES.get(alias) or {}
    return bool(entry.get("DISABLE_SERVER_SIDE_CURSORS"))


@register()
def check_listen_database(app_configs: Sequence[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """E012: LISTEN_DATABASE names an alias DATABASES has, on PostgreSQL."""
    if validate(jobretry_settings.raw)[1]:
        return []  # the settings check reports those
    alias = jobretry_settings.listen_database
    if alias is None:
        return []
    entry = settings.DATABASES.get(alias)
    where = f'JOBRETRY["LISTEN_DATABASE"] = {alias!r}'
    if entry is None:
        return [
            Error(
                f"{where} is not in DATABASES.{did_you_mean([alias], settings.DATABASES)}",
                hint=f"Add a DATABASES[{alias!r}] entry that connects straight to PostgreSQL, "
                f"or use one of {sorted(settings.DATABASES)}.",
                id="django_jobretry.E012",
            )
        ]
    engine = str(entry.get("ENGINE", ""))
    if not engine.startswith(POSTGRESQL):
        return [
            Error(
                f"{where}: that alias uses {engine!r}; only PostgreSQL has LISTEN/NOTIFY.",
                hint=f"ENGINE must be {POSTGRESQL!r}, on the database the jobs live in.",
                id="django_jobretry.E012",
            )
        ]
    return []


@register()
def check_transaction_pooling(app_configs: Sequence[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """W002: LISTEN through a pooled alias; W003: worker timeouts on a pooled "default"."""
    if validate(jobretry_settings.raw)[1]:
        return []
    found: list[CheckMessage] = []
    alias = listen_alias()
    if alias is not None and alias in settings.DATABASES and transaction_pooled(alias):
        found.append(
            Warning(
                f"Workers LISTEN on the DATABASES alias {alias!r}, which has "
                "DISABLE_SERVER_SIDE_CURSORS = True (a transaction pooler such as PgBouncer): "
                "notifications would not reach them, and they would only poll every POLL_SECONDS.",
                hint='Add an alias that connects straight to PostgreSQL and set JOBRETRY["LISTEN_DATABASE"] '
                'to it, or set JOBRETRY["LISTEN"] = False to poll only '
                "(python -m pydoc django_jobretry.conf.pooling says why).",
                id="django_jobretry.W002",
            )
        )
    if transaction_pooled(DEFAULT_DB_ALIAS):
        timeouts = ", ".join(jobretry_settings.session_timeouts_ms)
        found.append(
            Warning(
                f"DATABASES[{DEFAULT_DB_ALIAS!r}] has DISABLE_SERVER_SIDE_CURSORS = True (a transaction "
                f"pooler such as PgBouncer): workers do not set {timeouts} on their sessions there, "
                "where the settings would leak into other clients' transactions.",
                hint="Set them on the role the workers log in as, e.g. ALTER ROLE jobs_worker SET "
                "statement_timeout = '30s' (python -m pydoc django_jobretry.conf.pooling says why); then add "
                '"django_jobretry.W003" to SILENCED_SYSTEM_CHECKS.',
                id="django_jobretry.W003",
            )
        )
    return found
