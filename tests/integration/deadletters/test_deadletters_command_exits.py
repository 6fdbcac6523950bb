"""`manage.py deadletters`: usage errors and exit codes, in process and as a shell script sees them.

Usage errors use call_command (tests/integration/conftest.py's ``cli_run``);
exit codes and the no-TTY refusal are also checked on real `manage.py`
processes against the test database, which need committed rows
(transaction=True).
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from typing import Any

import pytest
from django.core.management.base import CommandError

from django_jobretry.deadletters import cli_bulk as cli
from django_jobretry.management.cli import rate
from django_jobretry.models import DeadLetter, Job
from tests.factories import DeadLetterFactory
from tests.integration.conftest import cli_run, exit_code
from tests.processes import ROOT, test_database_url


@pytest.mark.django_db
class TestUsage:
    @pytest.mark.parametrize(
        ("args", "fragment"),
        [
            (["requeue"], "name the dead letters to requeue by id, or pass --all"),
            (["discard", "--queue", "emails"], "name the dead letters to discard by id, or pass --all"),
            (["discard", "1", "--all"], "give dead letter ids or --all, not both"),
            (
                ["requeue", "1", "--queue", "emails", "--older-than", "1d"],
                "--queue, --older-than select dead letters for --all",
            ),
            (["discard", "1", "--since", "1h"], "--since select dead letters for --all"),
        ],
    )
    def test_a_bulk_action_needs_ids_or_all(self, args: list[str], fragment: str) -> None:
        DeadLetterFactory.create()
        code, message = exit_code(*args, "--yes")
        assert code == cli.EXIT_USAGE
        assert fragment in message
        assert (DeadLetter.objects.count(), Job.objects.count()) == (1, 0)

    @pytest.mark.parametrize(
        ("args", "fragment"),
        [
            (["list", "--reason", "sad"], "argument --reason: invalid choice: 'sad'"),
            (["list", "--older-than", "7 days"], "'7 days' is not a duration like 30d, 12h, 15m or 90s"),
            (["discard", "--all", "--older-than=-1d"], "'-1d' is not a duration"),
            (
                ["list", "--since", "last week"],
                "argument --since: 'last week' is neither a duration like 30d, 12h, 15m or 90s nor a date",
            ),
            (["list", "--since", "99999999d"], "argument --since: '99999999d' is out of range"),
            (["requeue", "--all", "--rate", "10/h"], "'10/h' is not a rate like 10/s or 30/m"),
            (["requeue", "--all", "--rate", "0/s"], "'0/s' is not a positive rate"),
            (["requeue", "--all", "--rate", "fast"], "'fast' is not a rate"),
            (["list", "--rate=1/s"], "unrecognized arguments: --rate=1/s"),
            (["list", "--limit", "0"], "0 is not between 1 and 1000"),
            (["list", "--after", "yesterday"], "'yesterday' is not a cursor printed by `deadletters list`"),
            (["list", "--after", "2026-01-01T00:00:00,5"], "is not a cursor"),  # naive time
            (["list", "--queue", "no spaces"], "queue_name 'no spaces' is invalid"),
            (["show"], "the following arguments are required: ID"),
            (["show", "x"], "'x' is not an integer"),
            (["requeue", "0"], "0 is not >= 1"),
            (["undo"], "invalid choice: 'undo'"),
        ],
    )
    def test_bad_values_are_clear_errors(self, args: list[str], fragment: str) -> None:
        with pytest.raises(CommandError, match="Error: ") as info:
            cli_run(*args)
        assert fragment in str(info.value)

    def test_invalid_settings_exit_4(self, settings: Any) -> None:
        settings.JOBRETRY = {"POLICIES": {"default": {"max_attempts": 0}}}
        code, message = exit_code("list", skip_checks=False)
        assert code == cli.EXIT_FAILED
        assert "django_jobretry.E" in message

    def test_rate_parsing(self) -> None:
        assert (rate("10/s"), rate("30/m"), rate(" 2.5 / s ")) == (10, 0.5, 2.5)


# --- real processes: exit codes and terminals as a shell script sees them ------------------------


def manage(*args: str, stdin: Any = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": test_database_url(), "DJANGO_SETTINGS_MODULE": "tests.settings"}
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "deadletters", *args],
        cwd=ROOT,
        env=env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.django_db(transaction=True)
class TestProcess:
    def test_bulk_discard_without_a_terminal_refuses_instead_of_hanging(self) -> None:
        DeadLetterFactory.create_batch(3)
        result = manage("discard", "--all")
        assert result.returncode == 2, result.stderr
        assert (
            "refusing to discard 3 dead letters without confirmation: stdin is not a terminal"
            in result.stderr
        )
        assert result.stdout == ""
        assert DeadLetter.objects.count() == 3

    def test_yes_discards_and_exits_0(self) -> None:
        DeadLetterFactory.create_batch(3)
        result = manage("discard", "--all", "--yes")
        assert (result.returncode, result.stdout) == (0, "discarded 3 of 3 dead letters\n"), result.stderr
        assert not DeadLetter.objects.exists()

    def test_a_terminal_is_asked(self) -> None:
        dead = DeadLetterFactory.create_batch(2)
        controller, terminal = pty.openpty()
        try:
            os.write(controller, b"y\n")
            result = manage("discard", *(str(d.pk) for d in dead), stdin=terminal)
        finally:
            os.close(terminal)
            os.close(controller)
        assert result.returncode == 0, result.stderr
        assert result.stderr == "Discard 2 dead letters? [y/N] "
        assert not DeadLetter.objects.exists()

    def test_exit_codes(self) -> None:
        kept, gone = DeadLetterFactory.create_batch(2)
        assert manage("discard", str(gone.pk)).returncode == 0
        partial = manage("requeue", str(kept.pk), str(gone.pk))
        assert partial.returncode == 1
        assert partial.stderr == "CommandError: 1 of 2 dead letters not requeued\n"
        assert manage("requeue", "--all", "--yes").returncode == 3
        assert manage("requeue").returncode == 2
        bad = manage("list", "--reason", "sad")
        assert bad.returncode == 2
        assert "argument --reason: invalid choice: 'sad'" in bad.stderr
        assert manage("list", "--older-than", "soon").returncode == 2
        assert manage("requeue", "--all", "--rate", "5/h").returncode == 2

    def test_list_json_and_help(self) -> None:
        dead = DeadLetterFactory.create()
        listing = manage("list", "--json")
        assert listing.returncode == 0, listing.stderr
        assert [item["id"] for item in json.loads(listing.stdout)["items"]] == [dead.pk]
        helped = manage("requeue", "--help")
        assert helped.returncode == 0
        assert "exit codes:" in helped.stdout
        assert "  3    nothing matched" in helped.stdout
