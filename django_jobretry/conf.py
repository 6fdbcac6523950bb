"""The one settings object: typed, validated, read lazily from settings.JOBRETRY.

Values are read at access time (cached until a `setting_changed` signal) so
`override_settings` works in tests and nothing is read at import.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from django_jobretry.exceptions import InvalidSettings, UnknownPolicy
from django_jobretry.policy import RetryPolicy
from django_jobretry.settings_schema import validate


class JobRetrySettings:
    """Access to JOBRETRY; raises :class:`InvalidSettings` when it is malformed."""

    def __init__(self) -> None:
        self._policies: dict[str, RetryPolicy] | None = None

    @property
    def raw(self) -> Any:
        return getattr(settings, "JOBRETRY", {})

    @property
    def policies(self) -> dict[str, RetryPolicy]:
        """Every configured policy by name; "default" is always present."""
        if self._policies is None:
            policies, problems = validate(self.raw)
            if problems:
                first = problems[0]
                raise InvalidSettings(f"django_jobretry.{first.id}: {first.msg} {first.hint}")
            self._policies = policies
        return self._policies

    def policy(self, name: str) -> RetryPolicy:
        """The policy called ``name``; :class:`UnknownPolicy` lists the known ones."""
        try:
            return self.policies[name]
        except KeyError:
            raise UnknownPolicy(name, list(self.policies)) from None

    def reset(self) -> None:
        self._policies = None


jobretry_settings = JobRetrySettings()


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: object) -> None:
    if setting == "JOBRETRY":
        jobretry_settings.reset()
