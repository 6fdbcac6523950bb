"""A module that fails on import, for the E006 check test."""

1 / 0  # noqa: B018
