"""`manage.py pause`: hold a queue's or a task's work on every worker (the command is holds/cli.py's)."""

from django_jobretry.holds.cli import Pause as Command

__all__ = ["Command"]
