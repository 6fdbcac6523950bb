"""Shared fixtures. Tests never mock the database: DATABASE_URL points at a real one."""

from __future__ import annotations

import os

import pytest

from tests.inprocess import keep_signal_handlers
from tests.processes import workers

__all__ = ["keep_signal_handlers", "workers"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Stop early, with the fix, when database tests are collected without a database."""
    if os.environ.get("DATABASE_URL"):
        return
    needing = [item.nodeid for item in items if item.get_closest_marker("django_db")]
    if needing:
        pytest.exit(
            f"{len(needing)} selected tests need PostgreSQL (e.g. {needing[0]}) but DATABASE_URL is "
            "not set. Run `make test`, which starts an embedded server, or set DATABASE_URL.",
            returncode=2,
        )
