"""Settings for mypy's Django plugin, which imports settings but opens no connection."""

import os

os.environ.setdefault("DATABASE_URL", "postgres://typecheck@localhost/not-connected")

from tests.settings import *  # noqa: F403
