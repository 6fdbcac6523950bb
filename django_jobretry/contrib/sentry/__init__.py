"""Sentry for django-jobretry (``pip install django-jobretry[sentry]``; docs/integrations.md).

``sentry_sdk.init(dsn=..., integrations=[JobRetryIntegration()])``.
"""

from __future__ import annotations

from django_jobretry.contrib.sentry.integration import JobRetryIntegration

__all__ = ["JobRetryIntegration"]
