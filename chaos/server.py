"""The PostgreSQL a chaos run uses: a private embedded server (restartable) or DATABASE_URL's.

A restart fault needs a server the harness may restart. When DATABASE_URL is
unset the harness starts its own throwaway server with the PostgreSQL
binaries devtools/pgembed.py finds, and can then `pg_ctl restart -m
immediate` it. Against DATABASE_URL (someone else's server) the restart is
skipped, and the run uses a scratch database created for it and dropped
afterwards, so it never collides with other databases on that server.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

from devtools import pgembed


@dataclass
class Database:
    """Where the run's jobs live, and what may be done to the server."""

    url: str
    version: str
    close: Callable[[], None]
    #: None when the server is not the harness's own: the restart fault is skipped.
    restart: Callable[[], None] | None


def with_database(url: str, name: str) -> str:
    """``url`` with its database name replaced by ``name`` (socket ?host= kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _create_scratch(server_url: str, name: str) -> None:
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _drop_scratch(server_url: str, name: str) -> None:
    try:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except psycopg.Error as exc:
        print(f"chaos: could not drop {name}: {exc}")


def _version(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return f"PostgreSQL {row[0] if row else '?'}"


def open_database(keep_dir: Path | None = None) -> Database:
    """DATABASE_URL's server with a scratch database, or a private restartable server."""
    external = os.environ.get("DATABASE_URL")
    if external:
        name = f"jobretry_chaos_{os.getpid()}"
        _create_scratch(external, name)
        url = with_database(external, name)
        return Database(url, _version(url), lambda: _drop_scratch(external, name), restart=None)
    return _own_server(keep_dir)


def _own_server(keep_dir: Path | None) -> Database:
    """initdb + pg_ctl into a temporary directory, as devtools/pgembed.py does for tests."""
    try:
        _, pg_ctl = pgembed._find_binaries()
    except pgembed.NoPostgres as exc:
        raise SystemExit(f"chaos: {exc}") from exc
    data_dir = keep_dir or Path(tempfile.mkdtemp(prefix="jobretry-chaos-pg-"))
    previous = os.environ.get("JOBRETRY_NO_PGSERVER")
    os.environ["JOBRETRY_NO_PGSERVER"] = "1"  # the binaries, so pg_ctl can restart it
    try:
        server = pgembed.start(data_dir, throwaway=keep_dir is None)
    finally:
        if previous is None:
            del os.environ["JOBRETRY_NO_PGSERVER"]
        else:
            os.environ["JOBRETRY_NO_PGSERVER"] = previous
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    pgdata = str(data_dir / "pgdata")

    def restart() -> None:
        # -m immediate: no checkpoint, the server recovers from its WAL like after a crash.
        subprocess.run(  # noqa: S603
            [*prefix, pg_ctl, "-D", pgdata, "-m", "immediate", "-w", "-t", "60", "restart"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    _create_scratch(server.url, "jobretry_chaos")
    url = with_database(server.url, "jobretry_chaos")

    def close() -> None:
        server.stop()
        if keep_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)

    return Database(url, f"{_version(url)} (embedded, {server.how})", close, restart)
