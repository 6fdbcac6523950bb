"""DATABASE_URL -> Django's DATABASES entry, without another dependency."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured


def database_from_url(url: str | None = None) -> dict[str, Any]:
    """Parse ``postgres://user:pass@host:port/name?host=/socket/dir``."""
    url = url if url is not None else os.environ.get("DATABASE_URL", "")
    if not url:
        raise ImproperlyConfigured(
            "DATABASE_URL is not set. Run through `make test` / `make demo` (they start an "
            "embedded PostgreSQL) or set DATABASE_URL=postgres://user@host:5432/dbname."
        )
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        raise ImproperlyConfigured(f"DATABASE_URL scheme {parts.scheme!r} is not supported; use postgres://")
    query = parse_qs(parts.query)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or "postgres"),
        "PASSWORD": unquote(parts.password or ""),
        # pgserver hands out socket URLs: the directory travels in ?host=.
        "HOST": query.get("host", [parts.hostname or ""])[0],
        "PORT": str(parts.port or ""),
        "CONN_MAX_AGE": 0,
    }
