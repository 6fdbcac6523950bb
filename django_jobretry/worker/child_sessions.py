"""The database sessions of a process-pool child: named when it starts, ended when it is killed.

Killing a child ends its process, not its sessions on the server: PostgreSQL
notices that a client is gone only when it next talks to it, so a statement
that was running (a long report, ``pg_sleep``, a transaction holding locks)
runs on, and every retry of the job would add another. So the worker gives
each child a random token, the child puts it in the ``application_name`` of
every connection it opens (a connection parameter: no extra round trip),
and after killing a child the worker terminates the sessions that carry it.
No other session has that name, so a backend pid reused meanwhile is never
hit. A transaction-pooled alias (pooling.py) is left alone: its server
sessions are shared by other clients, and ending them is the pooler's
business (PgBouncer's ``query_timeout``).

The runner thread that ends them waits like the worker's own threads do
(worker/watchdog.py): a partition must not keep a killed child's slot, or a
shutdown, waiting.
"""

from __future__ import annotations

import contextlib
import logging

from django.db import DatabaseError, InterfaceError, connections

from django_jobretry.conf.pooling import transaction_pooled
from django_jobretry.services.sql import loggable
from django_jobretry.worker import watchdog
from django_jobretry.worker.session import bound_connects

logger = logging.getLogger("django_jobretry")

#: PostgreSQL keeps the first 63 bytes of an application_name.
NAME_BYTES = 63
#: How long the worker waits for a terminated session to be gone, in milliseconds.
TERMINATE_WAIT_MS = 5000


def session_prefix(token: str) -> str:
    """What every session of the child with ``token`` is named first."""
    return f"jobretry-child-{token}"


def name_sessions(token: str) -> None:
    """In the child, before it connects: name its sessions after ``token``, then the project's name."""
    for alias in _ended_aliases():
        options = connections[alias].settings_dict.setdefault("OPTIONS", {})
        own = options.get("application_name")
        name = f"{session_prefix(token)} {own}" if own else session_prefix(token)
        options["application_name"] = name.encode()[:NAME_BYTES].decode(errors="ignore")


def end_sessions(token: str, child_pid: int | None) -> int:
    """In the worker, once the child with ``token`` is gone: terminate its sessions; how many there were."""
    ended = 0
    for alias in _ended_aliases():
        connection = connections[alias]
        opened_here = connection.connection is None
        bound_connects(connection)
        try:
            with connection.cursor() as cursor:
                watchdog.guard(connection.connection, alias)
                cursor.execute(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, %s)) FROM pg_stat_activity "
                    "WHERE starts_with(application_name, %s) AND pid <> pg_backend_pid()",
                    [TERMINATE_WAIT_MS, session_prefix(token)],
                )
                ended += cursor.fetchone()[0]
        except (DatabaseError, InterfaceError) as exc:
            fields = loggable(exc)
            place = watchdog.where(alias, connection.connection)
            logger.warning(
                "could not end the database sessions of job process %s on %s (%s, SQLSTATE %s): "
                "a statement it ran may go on until it ends",
                child_pid,
                place,
                fields["error_class"],
                fields["sqlstate"],
                extra={
                    "outcome": "child_sessions_left",
                    "child_pid": child_pid,
                    "database": alias,
                    "where": place,
                    **fields,
                },
            )
        finally:
            if opened_here:
                with contextlib.suppress(DatabaseError, InterfaceError):  # a broken one is gone anyway
                    connection.close()
    if ended:
        logger.info(
            "ended %d database sessions of job process %s",
            ended,
            child_pid,
            extra={"outcome": "child_sessions_ended", "child_pid": child_pid, "sessions": ended},
        )
    return ended


def _ended_aliases() -> list[str]:
    """The PostgreSQL aliases whose sessions a killed child's worker ends."""
    return [
        alias
        for alias in connections
        if connections[alias].vendor == "postgresql" and not transaction_pooled(alias)
    ]
