"""`manage.py deadletters`: the command lives in deadletters/cli.py; Django finds it by this path."""

from django_jobretry.deadletters.cli import Command

__all__ = ["Command"]
