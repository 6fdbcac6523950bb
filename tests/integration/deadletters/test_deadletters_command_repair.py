"""`deadletters list --arg` and `deadletters repair` (issue 36): what the admin does, on the command line.

``--arg`` reads the admin's argument search, refused where `show` redacts;
``repair`` applies the admin's checks through deadletters/repair.py, prints
the diff, asks, and refuses a change made meanwhile (the digest CAS). Text
options that PostgreSQL cannot take are one line and exit 2.
"""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import pytest
from django.db import connection

from django_jobretry.deadletters import cli_bulk as cli
from django_jobretry.models import DeadLetter, Job
from tests.factories import DeadLetterFactory
from tests.integration.conftest import cli_run, exit_code
from tests.manage_py import manage_py
from tests.processes import test_database_url

FLAKY = "tests.jobs_app.jobs.flaky"  # flaky(key, failures)
REDACTOR = "tests.integration.admin.test_admin_security.redact"


class Terminal(io.StringIO):
    """A stdin that claims to be a terminal, with the operator's answer typed in."""

    def isatty(self) -> bool:
        return True


def listed(*args: str) -> set[int]:
    out, _ = cli_run("list", "--json", *args)
    return {item["id"] for item in json.loads(out)["items"]}


@pytest.mark.django_db
class TestArgumentFilter:
    @pytest.fixture
    def rows(self) -> dict[str, DeadLetter]:
        return {
            "positional": DeadLetterFactory.create(task_name=FLAKY, args=["order-7", 5], kwargs={}),
            "keyword": DeadLetterFactory.create(
                task_name=FLAKY, args=[], kwargs={"key": "order-7", "failures": 5}
            ),
            "other": DeadLetterFactory.create(task_name=FLAKY, args=["order-8", 5], kwargs={}),
        }

    def test_a_parameter_name_finds_positional_and_keyword_arguments(
        self, rows: dict[str, DeadLetter]
    ) -> None:
        assert listed("--arg", "key=order-7") == {rows["positional"].pk, rows["keyword"].pk}
        assert listed("--arg", "failures=5") == {row.pk for row in rows.values()}
        assert listed("--arg", "failures=5", "--arg", "key='order-8'") == {rows["other"].pk}
        assert listed("--arg", "key=order") == set()  # whole values, as the help says

    def test_requeue_all_acts_on_exactly_the_matching_ones(self, rows: dict[str, DeadLetter]) -> None:
        out, _ = cli_run("requeue", "--all", "--arg", "key=order-7", "--yes")
        assert "requeued 2 of 2 dead letters" in out
        assert set(DeadLetter.objects.values_list("pk", flat=True)) == {rows["other"].pk}

    @pytest.mark.parametrize(
        ("search", "said"),
        [
            ("key=", "--arg: 'key=': a value after '='"),
            ('{"key": 1', "--arg: the argument search '{\"key\": 1' is not valid JSON"),
            ('key="\\u0000"', "--arg: the argument search contains a NUL character"),
            ("key=NaN", "holds nan"),
        ],
    )
    def test_a_search_that_cannot_be_read_is_a_usage_error(self, search: str, said: str) -> None:
        code, message = exit_code("list", "--arg", search)
        assert code == cli.EXIT_USAGE
        assert said in message

    def test_refused_while_a_redactor_hides_values(self, rows: dict[str, DeadLetter], settings: Any) -> None:
        settings.JOBRETRY = {**settings.JOBRETRY, "PAYLOAD_REDACTOR": REDACTOR}
        code, message = exit_code("list", "--arg", "key=order-7")
        assert code == cli.EXIT_USAGE
        assert "--arg: not available while a PAYLOAD_REDACTOR is configured" in message


@pytest.fixture
def dead() -> DeadLetter:
    return DeadLetterFactory.create(task_name=FLAKY, args=["order-7", 5], kwargs={})


def unchanged(dead: DeadLetter, args: list[Any] | None = None) -> None:
    dead.refresh_from_db()
    assert (dead.args, dead.kwargs) == (args or ["order-7", 5], {})
    assert not Job.objects.exists()


@pytest.mark.django_db
class TestRepair:
    def test_set_by_parameter_name_prints_the_diff_and_requeues(self, dead: DeadLetter) -> None:
        out, _ = cli_run(
            "repair", str(dead.pk), "--set", "failures=0", "--actor", "alice", stdin=Terminal("y\n")
        )
        job = Job.objects.get()
        assert (job.args, job.kwargs) == (["order-7", 0], {})
        assert out.splitlines() == [
            f"Repair dead letter {dead.pk} ({FLAKY}):",
            "  args[1] changed: 5 -> 0",
            f"repaired dead letter {dead.pk} (1 change) and requeued it as job {job.pk}",
        ]
        assert job.requeue_history[-1]["repair"] == {
            "by": "alice",
            "changes": [{"path": "args[1]", "change": "changed", "old": 5, "new": 0}],
        }
        assert not DeadLetter.objects.exists()

    def test_args_and_kwargs_replace_them_whole_and_set_applies_after(self, dead: DeadLetter) -> None:
        cli_run(
            "repair",
            str(dead.pk),
            "--args",
            '["order-9"]',
            "--kwargs",
            '{"failures": 1}',
            "--set",
            "key='order 10'",
            "--yes",
        )
        job = Job.objects.get()
        assert (job.args, job.kwargs) == (["order 10"], {"failures": 1})

    def test_dry_run_prints_the_diff_and_changes_nothing(self, dead: DeadLetter) -> None:
        out, _ = cli_run("repair", str(dead.pk), "--set", "key=order-8", "--dry-run")
        assert '  args[0] changed: "order-7" -> "order-8"' in out
        assert "dry run: nothing was changed" in out
        unchanged(dead)

    @pytest.mark.parametrize(
        ("args", "code", "said"),
        [
            ([], 2, "say what to change: --set NAME=VALUE"),
            (["--set", "failures"], 2, "--set: 'failures' is not NAME=VALUE"),
            (["--args", "[1"], 2, "--args: not valid JSON"),
            (["--kwargs", '{"failures": "\\u0000"}'], 2, "--kwargs: the value contains a NUL character"),
            (["--kwargs", '{"failures": NaN}'], 2, "--kwargs: the value holds nan"),
            (["--set", "key=\udcff"], 2, "--set: the value of 'key' contains a lone surrogate"),
            (["--args", "[" * 5000 + "]" * 5000], 2, "--args: nested too deeply to be read"),
            (["--set", "failures=" + "[" * 40 + "]" * 40], 2, "nested deeper than 32 levels"),
            (["--set", "nope=1"], 2, "flaky() cannot take these arguments: got an unexpected keyword"),
            (["--args", '{"a": 1}'], 2, "args must be a JSON array, not dict"),
            (["--set", "failures=5"], 2, "are unchanged: requeue it instead"),
            (["--set", "key.id=1"], 2, "--set key.id: key is not a JSON object"),
            (["--set", "failures=0", "--actor", "a\x00b"], 2, "--actor: 'a\\x00b' is not text"),
        ],
    )
    def test_refused_input_is_one_line_exit_2_and_changes_nothing(
        self, dead: DeadLetter, args: list[str], code: int, said: str
    ) -> None:
        exit_, message = exit_code("repair", str(dead.pk), *args, "--yes")
        assert (exit_, "\n" in message) == (code, False), message
        assert said in message, message
        unchanged(dead)

    def test_not_confirmed_changes_nothing(self, dead: DeadLetter) -> None:
        code, message = exit_code("repair", str(dead.pk), "--set", "failures=0", stdin=Terminal("n\n"))
        assert (code, message) == (cli.EXIT_USAGE, "not confirmed: nothing was changed")
        code, message = exit_code("repair", str(dead.pk), "--set", "failures=0", stdin=io.StringIO("y\n"))
        assert code == cli.EXIT_USAGE
        assert "without confirmation: stdin is not a terminal" in message
        unchanged(dead)

    def test_refused_while_a_redactor_hides_values(self, dead: DeadLetter, settings: Any) -> None:
        settings.JOBRETRY = {**settings.JOBRETRY, "PAYLOAD_REDACTOR": REDACTOR}
        code, message = exit_code("repair", str(dead.pk), "--set", "failures=0", "--yes")
        assert code == cli.EXIT_USAGE
        assert "PAYLOAD_REDACTOR hides" in message
        unchanged(dead)

    def test_a_dead_letter_that_is_gone_is_exit_1(self) -> None:
        code, message = exit_code("repair", "999999", "--set", "failures=0", "--yes")
        assert code == cli.EXIT_PARTIAL
        assert "not a dead letter (already requeued or discarded, or never existed): 999999" in message


class ChangedWhileAsked:
    """A terminal answering yes; meanwhile someone else changes the dead letter, on another connection."""

    def __init__(self, pk: int) -> None:
        self.pk = pk

    def isatty(self) -> bool:
        return True

    def readline(self) -> str:
        def elsewhere() -> None:
            try:
                DeadLetter.objects.filter(pk=self.pk).update(args=["order-7", 3])
            finally:
                connection.close()

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the other connection's update did not finish within 30 s"
        return "y\n"


@pytest.mark.django_db(transaction=True)
def test_a_change_made_while_the_diff_was_shown_is_refused_and_the_row_kept(dead: DeadLetter) -> None:
    """The digest compare-and-swap: the repair was built on ``failures=5``, the row now says 3."""
    code, message = exit_code("repair", str(dead.pk), "--set", "failures=0", stdin=ChangedWhileAsked(dead.pk))
    assert code == cli.EXIT_PARTIAL
    assert message == (
        f"dead letter {dead.pk}'s arguments were changed by someone else meanwhile: nothing was changed"
    )
    unchanged(dead, ["order-7", 3])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["list", "--task", "q\udcff"], "--task: 'q\\udcff' is not text PostgreSQL can take"),
        (["list", "--error-class", "E\udcfe"], "--error-class: 'E\\udcfe' is not text"),
        (["requeue", "--all", "--task", "t\udcff", "--yes"], "--task: 't\\udcff' is not text"),
        (["requeue", "1", "--actor", "\udcff", "--yes"], "--actor: '\\udcff' is not text"),
        (["import-django-q2", "--func", "f\udcff"], "--func: 'f\\udcff' is not text"),
        (["list", "--arg", "key=\udcff"], "--arg: the argument search contains a lone surrogate"),
        (
            ["repair", "1", "--kwargs", '{"\udcff": 1}'],
            "--kwargs: a key in the value contains a lone surrogate",
        ),
    ],
)
def test_text_that_is_not_utf8_is_one_line_and_exit_2_as_a_shell_runs_it(args: list[str], said: str) -> None:
    """argv bytes b"q\\xff" reach Python as "q\\udcff", refused by PostgreSQL: was exit 4."""
    DeadLetterFactory.create()
    done = manage_py(
        "deadletters",
        *args,
        env={"DATABASE_URL": test_database_url(), "DJANGO_SETTINGS_MODULE": "tests.settings"},
    )
    assert done.returncode == cli.EXIT_USAGE, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("CommandError: "), line
    assert said in line, line
    assert (DeadLetter.objects.count(), Job.objects.count()) == (1, 0)
