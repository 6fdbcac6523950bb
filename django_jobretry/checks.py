"""System checks for JOBRETRY: `manage.py check` names the bad key and value.

Ids are stable (documented in docs/settings.md); never renumber them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import CheckMessage, Error, register

from django_jobretry.conf import jobretry_settings
from django_jobretry.settings_schema import validate


@register()
def check_settings(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """Report every problem in settings.JOBRETRY, each with its own id and hint."""
    _, problems = validate(jobretry_settings.raw)
    return [Error(p.msg, hint=p.hint, id=f"django_jobretry.{p.id}") for p in problems]
