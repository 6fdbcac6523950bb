"""How our processes use their database connections: behind a transaction pooler, and with bounded TCP.

One module for the two ways a connection can betray a worker: a pooler
that moves its session, and a network that drops its packets.

**Workers behind a transaction pooler (PgBouncer ``pool_mode = transaction``).**

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

**Bounded TCP for the connections of our processes: a partition is an error within seconds, not a hang.**

Without these libpq parameters a connection whose packets are dropped (a
partition, a failed-over address, a firewall forgetting the flow) blocks
its thread until the kernel gives up: about two minutes to connect, about
15 minutes for a request sent and never acknowledged, two hours for a
connection left idle. The worker would log nothing meanwhile, and a command
would wait in silence. So the processes we own (``runworker``, its child
processes, and our management commands) connect with:

- ``connect_timeout``: a connection attempt fails after that many seconds;
- ``keepalives`` with ``keepalives_idle``, ``keepalives_interval`` and
  ``keepalives_count``: an idle connection is probed, and dropped when the
  probes go unanswered;
- ``tcp_user_timeout`` (milliseconds): data sent and not acknowledged for that
  long ends the connection (Linux; other systems ignore it).

A busy server is not a dead one: the kernel acknowledges data and probes
even while PostgreSQL is working on a long query or waiting on a lock, so
none of these cuts a slow statement short. A value of the project's own in
``DATABASES[alias]["OPTIONS"]`` always wins, ``0`` included (libpq's "off"
for each), and so does ``PGCONNECT_TIMEOUT`` in the environment. The reasons,
and why web processes are left alone: docs/decisions/0011-bounded-tcp-in-our-processes.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections

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
                "(python -m pydoc django_jobretry.conf.databases says why).",
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
                "statement_timeout = '30s' (python -m pydoc django_jobretry.conf.databases says why); "
                'then add "django_jobretry.W003" to SILENCED_SYSTEM_CHECKS.',
                id="django_jobretry.W003",
            )
        )
    return found


#: What our processes add to each PostgreSQL alias's OPTIONS that does not set them (docs/settings.md).
CONNECT_DEFAULTS: Mapping[str, int] = MappingProxyType(
    {
        "connect_timeout": 5,
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "tcp_user_timeout": 5000,
    }
)

#: libpq's environment variables for the same parameters (only connect_timeout has one).
ENVIRONMENT = {"connect_timeout": "PGCONNECT_TIMEOUT"}


def missing_defaults(options: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, int]:
    """The defaults an alias with these OPTIONS gets: those it sets neither there nor in the environment."""
    return {
        name: value
        for name, value in CONNECT_DEFAULTS.items()
        if name not in options and not (name in ENVIRONMENT and ENVIRONMENT[name] in environ)
    }


def apply_connect_defaults(environ: Mapping[str, str] = os.environ) -> dict[str, dict[str, int]]:
    """Add the defaults to every PostgreSQL alias, in place, before it connects; what was added, by alias.

    Changing ``settings.DATABASES`` entries in place is what every
    connection of the process reads, in every thread: Django's connection
    handler hands out these very dicts.
    """
    added: dict[str, dict[str, int]] = {}
    for alias in connections:
        try:
            vendor = connections[alias].vendor
        except ImproperlyConfigured:  # a backend this process cannot load: Django says so if it is used
            continue
        if vendor != "postgresql":
            continue
        options = connections.settings[alias].setdefault("OPTIONS", {})
        added[alias] = missing_defaults(options, environ)
        options.update(added[alias])
    return added
