"""`manage.py resume`: release a paused queue or task, or close a breaker (the command is holds/cli.py's)."""

from django_jobretry.holds.cli import Resume as Command

__all__ = ["Command"]
