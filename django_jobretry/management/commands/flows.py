"""`manage.py flows`: Django finds the command here; it lives with the workflows (flows/cli.py)."""

from django_jobretry.flows.cli import Command

__all__ = ["Command"]
