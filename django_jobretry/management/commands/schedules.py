"""`manage.py schedules`: Django finds the command here; it lives with the schedules (schedules/cli.py)."""

from django_jobretry.schedules.cli import Command

__all__ = ["Command"]
