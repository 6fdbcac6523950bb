"""Exceptions of the Django layer."""

from django.core.exceptions import ImproperlyConfigured

from django_jobretry.policy.errors import JobRetryError


class InvalidSettings(JobRetryError, ImproperlyConfigured):
    """settings.JOBRETRY is malformed; the message names the key and what is allowed."""


class UnknownPolicy(JobRetryError, LookupError):
    """A policy name was asked for that JOBRETRY["POLICIES"] does not define."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown retry policy {name!r}; JOBRETRY['POLICIES'] defines {sorted(known)}")
