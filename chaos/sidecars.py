"""Processes beside the workers: operators clicking bulk actions, and the pruner.

    python -m chaos.sidecars operator NAME
    python -m chaos.sidecars pruner [OLDER_THAN]

Operators use the dead-letter service the admin's bulk actions call
(`requeue_many`, `discard_many`); two of them run at once and pick the same
dead letters, so the guarded compare-and-swap is exercised under faults.
Before acting, an operator writes its intent (``chaos_intent``): the
invariants accept a vanished dead letter only if an operator meant to
discard it. The pruner runs `manage.py prunejobs --older-than OLDER_THAN` (2s by
default) every second, deleting succeeded jobs while workers finish others. Both survive database faults:
an error drops the connection and the loop goes on.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from types import FrameType

import django

STOP = False


def _stop(signum: int, frame: FrameType | None) -> None:
    global STOP  # noqa: PLW0603 - a signal handler's only way out
    STOP = True


def operator_round(name: str) -> None:
    """Requeue fatal dead letters once; discard every other one that died again."""
    from django.db import connection
    from django.db.models.functions import Mod

    from django_jobretry.deadletters import discard_many, requeue_many
    from django_jobretry.models import DeadLetter

    fresh = list(
        DeadLetter.objects.filter(task_name="chaos.fatal", requeue_count=0).values_list("id", flat=True)[:50]
    )
    again = list(
        DeadLetter.objects.filter(task_name="chaos.fatal", requeue_count=1)
        .alias(parity=Mod("job_id", 2))
        .filter(parity=0)
        .values_list("id", flat=True)[:50]
    )
    with connection.cursor() as cursor:
        for ids, action in ((fresh, "requeue"), (again, "discard")):
            for pk in ids:
                cursor.execute(
                    "INSERT INTO chaos_intent (dead_letter_id, action) VALUES (%s, %s)", [pk, action]
                )
    if fresh:
        requeue_many(fresh, actor=f"chaos-{name}")
    if again:
        discard_many(again, actor=f"chaos-{name}")


def prune_round(older_than: str) -> None:
    from django.core.management import call_command
    from django.core.management.base import CommandError
    from django.db import OperationalError

    from django_jobretry.management.cli import EXIT_UNREACHABLE

    try:
        call_command("prunejobs", "--older-than", older_than, verbosity=0)
    except CommandError as exc:
        # The command reports a database it cannot reach (a restart) as exit code 4, not as a
        # DatabaseError: for this loop it is one, to wait out like the workers do.
        if exc.returncode != EXIT_UNREACHABLE:
            raise
        raise OperationalError(str(exc)) from exc


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chaos.settings")
    django.setup()
    from django.db import DatabaseError, InterfaceError, connection

    signal.signal(signal.SIGTERM, _stop)
    role = argv[0]
    # An operator's second argument is its name, the pruner's its --older-than.
    name = argv[1] if role == "operator" and len(argv) > 1 else role
    older_than = argv[1] if role == "pruner" and len(argv) > 1 else "2s"
    while not STOP:
        try:
            if role == "operator":
                operator_round(name)
            else:
                prune_round(older_than)
        except (DatabaseError, InterfaceError) as exc:
            print(f"{name}: {type(exc).__name__}: {exc}", flush=True)
            connection.close()
        time.sleep(0.5 if role == "operator" else 1.0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
