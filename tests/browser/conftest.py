"""Debian's Chromium, driven headless by Playwright, for the real-browser tests.

The browser is the distribution's (package ``chromium``, /usr/bin/chromium),
never one that Playwright downloads: do not run ``playwright install``. The
tests only look for it, they never install it: ``make browser`` does (with
apt-get, as root or through sudo), and CI's ``.ci/run`` calls it before
``make test``. Without a Chromium the browser tests are skipped, and loudly:
the skip reason says why and how to get one, and a red banner in the terminal
summary (shown with ``-q`` too) says the admin was not tested in a browser.

Environment:

``JOBRETRY_CHROMIUM``
    The Chromium executable to use. When set, nothing else is looked up; a
    path that is not an executable file skips the tests (loudly), which is
    also how the skip path is checked:
    ``JOBRETRY_CHROMIUM=/nonexistent pytest tests/browser``.
``JOBRETRY_REQUIRE_BROWSER=1``
    Fail instead of skipping when no browser is found (for CI, where the
    browser test must run).
``JOBRETRY_BROWSER_SHOTS``
    A directory to keep the tests' screenshots in; by default each test's
    ``tmp_path``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from pytest_django.live_server_helper import LiveServer

#: Where Debian's package puts it; looked at first, then PATH.
DEBIAN_CHROMIUM = "/usr/bin/chromium"
#: How to get one, for the skip reason and the banner.
HOW_TO_GET_ONE = (
    "run `make browser` (Debian's chromium, via apt-get), or `apt-get install chromium` as root, "
    "or set JOBRETRY_CHROMIUM=/path/to/chromium; never `playwright install`"
)
#: Headless, as root, on a machine whose network is closed: without the
#: background-networking flags Chromium keeps trying (and failing) to reach
#: Google's hosts. Playwright adds a fresh ``--user-data-dir`` of its own to
#: every launch (and refuses one in ``args``), so each run starts from an
#: empty profile.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Milliseconds: starting the browser, and any single Playwright wait or assertion.
LAUNCH_TIMEOUT_MS = 30_000
WAIT_TIMEOUT_MS = 15_000


@dataclass(frozen=True)
class Chromium:
    """The browser the tests drive, or (``path`` None) why there is none."""

    path: str | None
    how: str


CHROMIUM_KEY = pytest.StashKey[Chromium]()


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _installed() -> str | None:
    for candidate in (DEBIAN_CHROMIUM, shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and _executable(candidate):
            return candidate
    return None


def find_chromium() -> Chromium:
    """The Chromium to drive: JOBRETRY_CHROMIUM, else Debian's, else one on PATH; never installs one."""
    override = os.environ.get("JOBRETRY_CHROMIUM")
    if override:
        if _executable(override):
            return Chromium(override, f"{override} (from JOBRETRY_CHROMIUM)")
        return Chromium(
            None, f"JOBRETRY_CHROMIUM={override} is not an executable file (nothing else looked up)"
        )
    if found := _installed():
        return Chromium(found, found)
    return Chromium(None, f"no Chromium at {DEBIAN_CHROMIUM} or on PATH (chromium, chromium-browser)")


def chromium(config: pytest.Config) -> Chromium:
    """find_chromium, once per test session."""
    if CHROMIUM_KEY not in config.stash:
        config.stash[CHROMIUM_KEY] = find_chromium()
    return config.stash[CHROMIUM_KEY]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    found = config.stash.get(CHROMIUM_KEY, None)
    if found is None:
        return
    if found.path is not None:
        if terminalreporter.verbosity >= 0:
            terminalreporter.write_line(f"tests/browser: drove {found.how}")
        return
    outcome = "FAILED" if os.environ.get("JOBRETRY_REQUIRE_BROWSER") == "1" else "SKIPPED"
    banner = f"BROWSER TESTS {outcome}: the admin was NOT tested in a real browser"
    terminalreporter.write_sep("!", banner, red=True, bold=True)
    terminalreporter.write_line(f"Why: {found.how}.", red=True, bold=True)
    terminalreporter.write_line(f"Fix: {HOW_TO_GET_ONE}.", red=True, bold=True)


@pytest.fixture(scope="session")
def chromium_executable(pytestconfig: pytest.Config) -> str:
    """The path of the Chromium to drive; skips (or, with JOBRETRY_REQUIRE_BROWSER=1, fails) without one."""
    found = chromium(pytestconfig)
    if found.path is None:
        message = (
            f"BROWSER TESTS SKIPPED - the admin was NOT tested in a real browser: {found.how}; "
            f"to get one, {HOW_TO_GET_ONE}"
        )
        if os.environ.get("JOBRETRY_REQUIRE_BROWSER") == "1":
            pytest.fail(message.replace("SKIPPED", "CANNOT RUN"), pytrace=False)
        pytest.skip(message)  # pytest_terminal_summary adds the banner
    return found.path


@pytest.fixture(scope="module")
def browser(chromium_executable: str) -> Iterator[Browser]:
    """Headless Chromium for one test module.

    Playwright's sync API keeps an asyncio event loop marked as running in
    this thread from start to stop, so every ORM call the test makes meanwhile
    (factories, assertions, pytest-django's flush) trips Django's
    async-safety check (SynchronousOnlyOperation), although nothing runs
    concurrently: the loop only serves Playwright's own calls.
    DJANGO_ALLOW_ASYNC_UNSAFE switches that check off exactly while Playwright
    runs, and module scope ends both before another module's tests, which keep
    the check.
    """
    with pytest.MonkeyPatch.context() as env, sync_playwright() as playwright:
        env.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        launched = playwright.chromium.launch(
            executable_path=chromium_executable,
            args=CHROMIUM_FLAGS,
            headless=True,
            timeout=LAUNCH_TIMEOUT_MS,
        )
        expect.set_options(timeout=WAIT_TIMEOUT_MS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser, live_server: LiveServer) -> Iterator[Page]:
    """A fresh browser context (no cookies) on the live server, every wait bounded."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 800})
    context.set_default_timeout(WAIT_TIMEOUT_MS)
    context.set_default_navigation_timeout(WAIT_TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where a test saves its screenshots (JOBRETRY_BROWSER_SHOTS, else its tmp_path)."""
    kept = os.environ.get("JOBRETRY_BROWSER_SHOTS")
    if not kept:
        return tmp_path
    folder = Path(kept)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
