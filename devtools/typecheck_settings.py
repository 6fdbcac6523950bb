"""Settings for mypy's Django plugin, which imports settings but opens no connection."""

from tests.settings import *  # noqa: F403
