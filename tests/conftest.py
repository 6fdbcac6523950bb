"""Shared fixtures. Tests never mock the database: DATABASE_URL points at a real one."""

from __future__ import annotations

import asyncio
import os

import django
import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from tests import otel_sdk
from tests.inprocess import keep_signal_handlers
from tests.processes import workers
from tests.recovery import reset_broken_connections

__all__ = ["keep_signal_handlers", "workers"]

otel_sdk.install()

# django.tasks, and with it JobRetryBackend, exists from Django 6.0 on. On Django 5.2
# (`make matrix`) the modules that need it are not collected at all, since importing them
# fails there. Django 5.2 runs tests/integration/django_tasks/test_without_django_tasks.py
# instead: the backend refuses to load with a clear message, and the rest of the app works.
collect_ignore_glob = (
    []
    if django.VERSION >= (6, 0)
    else ["integration/django_tasks/test_tasks_*.py", "features/test_django_tasks.py"]
)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Without DATABASE_URL, run in one process (pytest-xdist off).

    The check below then stops the run once, with its fix; in pytest-xdist's
    workers it would stop each worker, which xdist restarts again and again.
    """
    if not os.environ.get("DATABASE_URL") and getattr(config.option, "numprocesses", None):
        config.option.numprocesses = None
        config.option.dist = "no"


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


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """Once every fixture of the test is torn down, reset a connection it left busy (tests/recovery.py).

    And close what Django's ``sync_to_async`` thread opened (``aprogress()``, the ORM's async
    methods, an in-process event loop's receivers): that thread lives as long as the process,
    and a connection it kept would stop the test database from being dropped at the end.
    """
    try:
        return (yield)
    finally:
        reset_broken_connections(item.config)
        if item.get_closest_marker("django_db"):
            close_sync_to_async_connections()


def close_sync_to_async_connections() -> None:
    """Close the connections of ``sync_to_async``'s thread; not while a loop runs here (Playwright's)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(sync_to_async(connections.close_all)())
