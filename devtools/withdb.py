"""Run a command with DATABASE_URL pointing at a usable PostgreSQL.

    python -m devtools.withdb --throwaway -- pytest
    python -m devtools.withdb --data .pgdata/demo -- python manage.py demo

If DATABASE_URL is already set it is used as is; otherwise a private server is
started (see devtools.pgembed) and stopped again when the command ends.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from devtools import pgembed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--data", type=Path, help="keep the server's files here between runs")
    where.add_argument("--throwaway", action="store_true", help="use a temporary server, deleted afterwards")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given; put it after --")

    if os.environ.get("DATABASE_URL"):
        print("withdb: using DATABASE_URL from the environment", file=sys.stderr)
        return subprocess.call(command)

    data_dir = Path(tempfile.mkdtemp(prefix="jobretry-pg-")) if args.throwaway else args.data.resolve()
    try:
        server = pgembed.start(data_dir, throwaway=args.throwaway)
    except pgembed.NoPostgres as exc:
        print(f"withdb: {exc}", file=sys.stderr)
        return 2
    print(f"withdb: embedded PostgreSQL ({server.how}) at {server.url}", file=sys.stderr)
    try:
        return subprocess.call(command, env={**os.environ, "DATABASE_URL": server.url})
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
