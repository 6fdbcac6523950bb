"""Rows the schema refuses now as they may still be stored: from before a check, or its NOT VALID window.

A test drops the check inside its own transaction (rolled back with the
test), then writes the row the way an older deploy or a hand-made fix did.
"""

from __future__ import annotations

from django.db import connection, models


def without_checks(model: type[models.Model], *names: str) -> None:
    """Drop ``model``'s CHECK constraints ``names`` for the rest of this test's transaction."""
    assert connection.in_atomic_block, "only inside a test transaction, which puts them back"
    with connection.cursor() as cursor:
        for name in names:
            cursor.execute(f'ALTER TABLE {model._meta.db_table} DROP CONSTRAINT "{name}"')
