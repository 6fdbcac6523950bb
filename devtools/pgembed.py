"""Start a private PostgreSQL for `make test` / `make demo` when DATABASE_URL is unset.

The `pgserver` package ships PostgreSQL binaries in its wheel (CPython 3.12).
Elsewhere we fall back to `initdb`/`pg_ctl` found on the machine, and failing
that we stop with a message that says to set DATABASE_URL.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# Unix socket paths are limited to ~107 bytes; leave room for ".s.PGSQL.5432".
_MAX_SOCKET_DIR = 80


class NoPostgres(RuntimeError):
    """Neither pgserver nor PostgreSQL binaries are available."""


@dataclass
class EmbeddedServer:
    """A running private server and how to stop it."""

    url: str
    stop: Callable[[], None]
    how: str


def start(data_dir: Path, *, throwaway: bool) -> EmbeddedServer:
    """Start (or reuse) a server keeping its files in ``data_dir``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    if not os.environ.get("JOBRETRY_NO_PGSERVER"):
        try:
            from pgserver.postgres_server import get_server
        except ImportError:
            pass
        else:
            server = get_server(data_dir, cleanup_mode="delete" if throwaway else "stop")
            return EmbeddedServer(server.get_uri(), server.cleanup, "pgserver")
    return _start_with_binaries(data_dir, throwaway=throwaway)


def _find_binaries() -> tuple[str, str]:
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return initdb, pg_ctl
    # Debian keeps them off PATH, one folder per major version; take the newest.
    for bindir in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_major, reverse=True):
        if os.path.exists(f"{bindir}/initdb") and os.path.exists(f"{bindir}/pg_ctl"):
            return f"{bindir}/initdb", f"{bindir}/pg_ctl"
    raise NoPostgres(
        "No embedded PostgreSQL: the pgserver package is not installed for this Python "
        "(it ships wheels for CPython 3.12) and no initdb/pg_ctl were found. "
        "Install PostgreSQL or set DATABASE_URL, e.g. "
        "DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres make test"
    )


def _major(bindir: str) -> float:
    try:
        return float(Path(bindir).parent.name)
    except ValueError:
        return 0.0


def _start_with_binaries(data_dir: Path, *, throwaway: bool) -> EmbeddedServer:
    initdb, pg_ctl = _find_binaries()
    # PostgreSQL refuses to run as root; run it as the "postgres" user then.
    prefix: list[str] = []
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError as exc:
            raise NoPostgres("Running as root and no 'postgres' user exists; set DATABASE_URL.") from exc
        prefix = ["runuser", "-u", "postgres", "--"]
    pgdata = data_dir / "pgdata"
    socket_dir = data_dir if len(str(data_dir)) <= _MAX_SOCKET_DIR else Path(tempfile.mkdtemp(prefix="jr-"))
    if prefix:
        for path in {data_dir, socket_dir}:
            os.chown(path, owner.pw_uid, owner.pw_gid)
    if not (pgdata / "PG_VERSION").exists():
        subprocess.run(
            [*prefix, initdb, "-D", str(pgdata), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    options = f"-k {socket_dir} -c listen_addresses=''"
    subprocess.run(
        [
            *prefix,
            pg_ctl,
            "-D",
            str(pgdata),
            "-o",
            options,
            "-l",
            str(data_dir / "server.log"),
            "-w",
            "start",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )

    def stop() -> None:
        subprocess.run([*prefix, pg_ctl, "-D", str(pgdata), "-m", "fast", "-w", "stop"], check=False)
        if throwaway:
            shutil.rmtree(data_dir, ignore_errors=True)

    return EmbeddedServer(
        f"postgresql://postgres@/postgres?host={socket_dir}", stop, Path(initdb).parent.name
    )
