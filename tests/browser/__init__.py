"""Real-browser tests: Playwright driving Debian's Chromium, headless, against pytest-django's live_server."""
