"""`manage.py deadletters groups`: the failure groups, largest first, as a table or JSON.

Each row's fingerprint is what `requeue --all --fingerprint` and `discard
--all --fingerprint` take, so the command line answers the same questions as
the admin's "Failure groups" page (services/failure_groups.py).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand
from django.core.serializers.json import DjangoJSONEncoder

from django_jobretry.management.deadletter_cli import clip, error_line, table, when
from django_jobretry.services.failure_groups import FailureGroup, groups

HEADERS = ("fingerprint", "dead", "first seen", "last seen", "tasks", "reasons", "example")
CAPS = (16, 10, 25, 25, 60, 30, 80)


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    """Print the groups ``options`` (``--since``, ``--limit``, ``--json``) select."""
    found = groups(since=options["since"], limit=options["limit"])
    if options["json"]:
        out = {"groups": [as_json(group) for group in found]}
        command.stdout.write(json.dumps(out, cls=DjangoJSONEncoder, indent=2))
        return
    if not found:
        command.stdout.write("No dead letters match.")
        return
    for line in table(HEADERS, [row(group) for group in found], CAPS):
        command.stdout.write(line)
    command.stdout.write(
        "Act on a group: manage.py deadletters requeue --all --fingerprint FINGERPRINT (or discard)"
    )


def row(group: FailureGroup) -> tuple[object, ...]:
    example = error_line(group.example_class, group.example_message)
    return (
        group.fingerprint,
        group.count,
        when(group.first_seen),
        when(group.last_seen),
        ", ".join(group.tasks),
        ", ".join(group.reasons),
        clip(example, 80),
    )


def as_json(group: FailureGroup) -> dict[str, Any]:
    return {
        "fingerprint": group.fingerprint,
        "count": group.count,
        "first_seen": group.first_seen,
        "last_seen": group.last_seen,
        "tasks": group.tasks,
        "reasons": group.reasons,
        "example_class": group.example_class,
        "example_message": group.example_message,
    }
