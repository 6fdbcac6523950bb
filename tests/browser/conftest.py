"""Debian's Chromium, driven headless by Playwright, for the real-browser tests.

The browser is the distribution's (package ``chromium``, /usr/bin/chromium),
never one that Playwright downloads: do not run ``playwright install``. When
no Chromium is found and this process is root with apt-get, it is installed
here (``apt-get update``, then ``apt-get install -y chromium``). Only when
that is impossible are the browser tests skipped, and loudly: the skip reason
says why, and a red banner in the terminal summary (shown with ``-q`` too)
says the admin was not tested in a browser.

Environment:

``JOBRETRY_CHROMIUM``
    The Chromium executable to use. When set, nothing is looked up or
    installed; a path that is not an executable file skips the tests (loudly),
    which is also how the skip path is checked:
    ``JOBRETRY_CHROMIUM=/nonexistent pytest tests/browser``.
``JOBRETRY_REQUIRE_BROWSER=1``
    Fail instead of skipping when no browser can be had (for CI, where the
    browser test must run).
``JOBRETRY_BROWSER_SHOTS``
    A directory to keep the tests' screenshots in; by default each test's
    ``tmp_path``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from pytest_django.live_server_helper import LiveServer

#: Where Debian's package puts it; looked at first, then PATH.
DEBIAN_CHROMIUM = "/usr/bin/chromium"
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
#: Seconds apt-get may take: the package index, then chromium and its libraries.
APT_UPDATE_TIMEOUT = 300
APT_INSTALL_TIMEOUT = 900
#: Milliseconds: starting the browser, and any single Playwright wait or assertion.
LAUNCH_TIMEOUT_MS = 30_000
WAIT_TIMEOUT_MS = 15_000


@dataclass(frozen=True)
class Chromium:
    """The browser the tests drive, or (``path`` None) why there is none."""

    path: str | None
    how: str


CHROMIUM_KEY = pytest.StashKey[Chromium]()


def _terminal(config: pytest.Config) -> pytest.TerminalReporter | None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    return reporter if isinstance(reporter, pytest.TerminalReporter) else None


def _say(config: pytest.Config, line: str) -> None:
    """A line on the terminal even under ``-q`` (called outside tests, where output is not captured)."""
    if (reporter := _terminal(config)) is not None:
        reporter.ensure_newline()
        reporter.write_line(line)


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _installed() -> str | None:
    for candidate in (DEBIAN_CHROMIUM, shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and _executable(candidate):
            return candidate
    return None


def _why_not_installable() -> str | None:
    """None when this process may install packages with apt-get, else the reason it may not."""
    geteuid = getattr(os, "geteuid", None)
    if geteuid is None or geteuid() != 0:
        return "this process is not root, so it cannot install it with apt-get"
    if shutil.which("apt-get") is None:
        return "there is no apt-get to install it with"
    return None


def _apt_get(*args: str, timeout: int) -> str | None:
    """Runs apt-get; None on success, else what went wrong (the end of its output)."""
    command = ["apt-get", *args]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"`{' '.join(command)}` did not finish within {timeout} s"
    except OSError as exc:
        return f"`{' '.join(command)}` could not start: {exc}"
    if done.returncode == 0:
        return None
    tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
    return f"`{' '.join(command)}` exited with {done.returncode}: {tail}"


def find_chromium(config: pytest.Config) -> Chromium:
    """The Chromium to drive: JOBRETRY_CHROMIUM, else Debian's, installed with apt-get if need be."""
    override = os.environ.get("JOBRETRY_CHROMIUM")
    if override:
        if _executable(override):
            return Chromium(override, f"{override} (from JOBRETRY_CHROMIUM)")
        return Chromium(
            None, f"JOBRETRY_CHROMIUM={override} is not an executable file (nothing looked up or installed)"
        )
    if found := _installed():
        return Chromium(found, found)
    missing = f"no Chromium at {DEBIAN_CHROMIUM} or on PATH"
    if why := _why_not_installable():
        return Chromium(None, f"{missing}, and {why}")
    _say(config, f"tests/browser: {missing}; installing Debian's chromium with apt-get (takes a minute)...")
    error = _apt_get("update", timeout=APT_UPDATE_TIMEOUT) or _apt_get(
        "install", "-y", "chromium", timeout=APT_INSTALL_TIMEOUT
    )
    if found := _installed():
        return Chromium(found, f"{found}, installed with apt-get just now")
    return Chromium(None, f"{missing}, and installing it failed: {error or 'apt-get installed no chromium'}")


def chromium(config: pytest.Config) -> Chromium:
    """find_chromium, once per test session."""
    if CHROMIUM_KEY not in config.stash:
        config.stash[CHROMIUM_KEY] = find_chromium(config)
    return config.stash[CHROMIUM_KEY]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Look for (and maybe install) the browser before the first test starts.

    In the session fixture alone, an apt-get install would count against the
    first browser test's pytest-timeout (its setup is timed too) and could be
    cut short; here it runs before any timer, and only when browser tests
    are selected (trylast: after -k/-m deselection).
    """
    if config.option.collectonly:
        return
    here = Path(__file__).parent
    if any(here in item.path.parents for item in items):
        chromium(config)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    found = config.stash.get(CHROMIUM_KEY, None)
    if found is None:
        return
    if found.path is not None:
        if terminalreporter.verbosity >= 0:
            terminalreporter.write_line(f"tests/browser: drove {found.how}")
        return
    banner = "BROWSER TESTS SKIPPED: the admin was NOT tested in a real browser"
    terminalreporter.write_sep("!", banner, red=True, bold=True)
    terminalreporter.write_line(f"Why: {found.how}.", red=True, bold=True)
    terminalreporter.write_line(
        "Fix: run the tests as root on Debian (they install the chromium package with apt-get), "
        "or install it yourself, or set JOBRETRY_CHROMIUM=/path/to/chromium. "
        "Never `playwright install`.",
        red=True,
        bold=True,
    )


@pytest.fixture(scope="session")
def chromium_executable(pytestconfig: pytest.Config) -> str:
    """The path of the Chromium to drive; skips (or, with JOBRETRY_REQUIRE_BROWSER=1, fails) without one."""
    found = chromium(pytestconfig)
    if found.path is None:
        message = f"BROWSER TESTS SKIPPED - the admin was NOT tested in a real browser: {found.how}"
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
