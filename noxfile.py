"""`make matrix`: the test suite on each supported Django series."""

from __future__ import annotations

import os

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests"]


@nox.session
@nox.parametrize("django", ["5.2", "6.0", "6.1"])
def tests(session: nox.Session, django: str) -> None:
    """Pytest on one Django series, against an embedded PostgreSQL unless DATABASE_URL is set."""
    session.install("-e", ".[dev]", f"django~={django}.0")
    workers = os.environ.get("PYTEST_WORKERS") or str((os.cpu_count() or 2) + 1)
    session.run(
        "python",
        "-m",
        "devtools.withdb",
        "--throwaway",
        "--",
        "python",
        "-m",
        "pytest",
        "-n",
        workers,
        *session.posargs,
    )
