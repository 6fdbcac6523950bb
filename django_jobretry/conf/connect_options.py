"""Bounded TCP for the connections of our processes: a partition is an error within seconds, not a hang.

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
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connections

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
