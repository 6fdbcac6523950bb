"""`manage.py deadletters list` and `show`: filters, keyset pages, JSON, redaction, missing ids.

In-process tests through call_command (tests/integration/conftest.py's
``cli_run``); the actions are in test_deadletters_command_actions.py, usage
errors and real processes in test_deadletters_command_exits.py.
"""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import DurationField, Value
from django.db.models.functions import Now
from django.utils import timezone

from django_jobretry import FatalError
from django_jobretry.deadletters import cli_bulk as cli
from django_jobretry.models import DeadLetter, DeadReason
from tests.attempts import fail_attempt
from tests.factories import DeadLetterFactory
from tests.integration.conftest import cli_run, exit_code
from tests.jobs_app import jobs

OTHER_TASK = "tests.jobs_app.jobs.other_queue"


def listed(*args: str) -> list[int]:
    out, _ = cli_run("list", "--json", *args)
    return [item["id"] for item in json.loads(out)["items"]]


def age(dead: DeadLetter, days: float) -> None:
    DeadLetter.objects.filter(pk=dead.pk).update(
        dead_at=Now() - Value(timedelta(days=days), output_field=DurationField())
    )


def redact_emails(
    task_name: str, args: list[Any], kwargs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    return ["[redacted]" if "@" in str(a) else a for a in args], dict.fromkeys(kwargs, "[redacted]")


def broken_redactor(
    task_name: str, args: list[Any], kwargs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    raise RuntimeError("oops " + str(args))


@pytest.mark.django_db
class TestList:
    def test_table_newest_first_with_each_filter(self) -> None:
        fatal = DeadLetterFactory.create()
        exhausted = DeadLetterFactory.create(exhausted=True, queue_name="emails")
        other = DeadLetterFactory.create(task_name=OTHER_TASK, reason=DeadReason.DEADLINE, attempts=2)
        age(fatal, 3)
        out, _ = cli_run("list")
        lines = out.splitlines()
        assert lines[0].split() == [
            "id",
            "dead_at",
            "task",
            "queue",
            "reason",
            "attempts",
            "requeues",
            "last",
            "error",
        ]
        assert [int(line.split()[0]) for line in lines[1:]] == [other.pk, exhausted.pk, fatal.pk]
        assert lines[3].split()[4:] == [
            "default",
            "fatal",
            "1/3",
            "0",
            "FatalError:",
            "payload",
            "for",
            "k",
            "is",
            "invalid",
        ]
        assert listed("--queue", "emails") == [exhausted.pk]
        assert listed("--task", OTHER_TASK) == [other.pk]
        assert listed("--reason", "exhausted") == [exhausted.pk]
        assert listed("--error-class", "builtins.ConnectionResetError") == [other.pk, exhausted.pk]
        # What `list` prints (the class name alone) selects too; a dotted name must match whole.
        assert listed("--error-class", "ConnectionResetError") == [other.pk, exhausted.pk]
        assert listed("--error-class", "ResetError") == []
        assert listed("--error-class", "ins.ConnectionResetError") == []
        assert listed("--error-class", "FatalError") == [fatal.pk]
        assert listed("--older-than", "2d") == [fatal.pk]
        assert listed("--older-than", "4d") == []
        assert listed("--queue", "default", "--reason", "deadline") == [other.pk]
        # --since: the other side of --older-than, as a duration or a time; both make a window.
        age(exhausted, 1)
        assert listed("--since", "2d") == [other.pk, exhausted.pk]
        assert listed("--since", "90s") == [other.pk]
        cutoff = timezone.localtime(timezone.now() - timedelta(days=2)).replace(tzinfo=None)
        assert listed("--since", cutoff.isoformat(timespec="seconds")) == [other.pk, exhausted.pk]
        assert listed("--since", "4d", "--older-than", "2d") == [fatal.pk]

    def test_keyset_pages_follow_the_printed_cursor(self) -> None:
        dead = DeadLetterFactory.create_batch(5)
        for index, letter in enumerate(dead):  # distinct dead_at, oldest first
            age(letter, 5 - index)
        out, _ = cli_run("list", "--limit", "2")
        assert out.splitlines()[-1].startswith("More dead letters: repeat with the same filters and --after ")
        seen: list[int] = []
        after: list[str] = []
        for _ in range(3):
            page = json.loads(cli_run("list", "--json", "--limit", "2", *after)[0])
            seen += [item["id"] for item in page["items"]]
            after = ["--after", page["next_cursor"]] if page["next_cursor"] else []
        assert seen == [d.pk for d in reversed(dead)]
        assert after == []
        text_cursor = out.splitlines()[-1].rsplit(" ", 1)[1]
        assert listed("--limit", "2", "--after", text_cursor) == [dead[2].pk, dead[1].pk]

    def test_json_has_the_fields_and_no_arguments(self) -> None:
        dead = DeadLetterFactory.create(args=["secret@example.com"], requeue_count=2)
        page = json.loads(cli_run("list", "--json")[0])
        assert page["next_cursor"] is None
        [item] = page["items"]
        assert item["id"] == dead.pk
        assert (item["task"], item["queue"], item["reason"], item["attempts"], item["requeue_count"]) == (
            "tests.jobs_app.jobs.record",
            "default",
            "fatal",
            1,
            2,
        )
        assert item["last_error"] == "payload for k is invalid"
        assert "secret" not in json.dumps(page)

    def test_nothing_matches_is_not_an_error(self) -> None:
        assert cli_run("list") == ("No dead letters match.\n", "")
        assert json.loads(cli_run("list", "--json")[0]) == {"items": [], "next_cursor": None}

    def test_terminal_control_characters_in_errors_are_escaped(self) -> None:
        DeadLetterFactory.create(last_error="\x1b]0;owned\x07boom\nsecond line")
        out, _ = cli_run("list")
        assert "\x1b" not in out
        assert "\x07" not in out
        assert "\\x1b]0;owned\\x07boom" in out
        assert "second line" not in out


@pytest.mark.django_db
class TestShow:
    def test_shows_fields_arguments_errors_and_tracebacks(self) -> None:
        dead = DeadLetterFactory.create(exhausted=True, args=["a@example.com", 7], kwargs={"lang": "fr"})
        out, _ = cli_run("show", str(dead.pk))
        assert out.startswith(f"Dead letter {dead.pk} (job {dead.job_id})\n")
        for fragment in (
            "task:          tests.jobs_app.jobs.record",
            "reason:        exhausted (Attempts exhausted)",
            "attempts:      3 of 3",
            '"a@example.com"',
            '"lang": "fr"',
            "Error history (3 attempts recorded)",
            "attempt 1 at ",
            "retried after 10ms",
            "attempt 3 at ",
            "builtins.ConnectionResetError: upstream reset for k",
            "| Traceback (most recent call last):",
            "Requeue history (never requeued)",
        ):
            assert fragment in out
        # Three attempts with one traceback: printed once, then named.
        assert out.count("| Traceback (most recent call last):") == 1
        assert out.count("| (the same traceback as attempt 1)") == 2

    def test_requeue_history_of_a_job_that_died_again(self) -> None:
        jobs.fatal.enqueue("twice")
        fail_attempt(FatalError("first"))
        first = DeadLetter.objects.get()
        cli_run("requeue", str(first.pk), "--actor", "alice")
        fail_attempt(FatalError("second"))
        second = DeadLetter.objects.get()
        out, _ = cli_run("show", str(second.pk))
        assert "requeued:      1 time before" in out
        assert "Requeue history (1)" in out
        assert (
            f"by alice: from dead letter {first.pk} (job {first.job_id}, fatal after 1 attempt, dead at "
            in out
        )
        assert "last error: first" in out
        detail = json.loads(cli_run("show", "--json", str(second.pk))[0])["dead_letters"][0]
        assert [entry["by"] for entry in detail["requeue_history"]] == ["alice"]

    def test_arguments_go_through_the_redactor(self, settings: Any) -> None:
        settings.JOBRETRY = {**settings.JOBRETRY, "PAYLOAD_REDACTOR": f"{__name__}.redact_emails"}
        dead = DeadLetterFactory.create(args=["a@example.com", 7], kwargs={"token": "s3cr3t"})
        out, _ = cli_run("show", str(dead.pk))
        assert "a@example.com" not in out
        assert "s3cr3t" not in out
        assert '"[redacted]",' in out
        assert "7" in out
        detail = json.loads(cli_run("show", "--json", str(dead.pk))[0])["dead_letters"][0]
        assert (detail["args"], detail["kwargs"]) == (["[redacted]", 7], {"token": "[redacted]"})

    def test_a_failing_redactor_hides_the_arguments(self, settings: Any) -> None:
        settings.JOBRETRY = {**settings.JOBRETRY, "PAYLOAD_REDACTOR": f"{__name__}.broken_redactor"}
        dead = DeadLetterFactory.create(args=["a@example.com"])
        out, _ = cli_run("show", str(dead.pk))
        assert "a@example.com" not in out
        assert "hidden: PAYLOAD_REDACTOR raised RuntimeError" in out
        detail = json.loads(cli_run("show", "--json", str(dead.pk))[0])["dead_letters"][0]
        assert (detail["args"], detail["arguments_hidden"]) == (
            None,
            "hidden: PAYLOAD_REDACTOR raised RuntimeError",
        )

    def test_missing_ids_are_reported_with_exit_1(self) -> None:
        dead = DeadLetterFactory.create()
        code, message = exit_code("show", str(dead.pk), "999999999")
        assert code == cli.EXIT_PARTIAL
        assert "999999999" in message
        out = io.StringIO()
        with pytest.raises(CommandError):
            call_command("deadletters", "show", "--json", str(dead.pk), "999999999", stdout=out)
        shown = json.loads(out.getvalue())
        assert ([d["id"] for d in shown["dead_letters"]], shown["missing"]) == ([dead.pk], [999999999])


@pytest.mark.django_db
class TestHints:
    def test_a_task_name_without_its_module_is_suggested_in_full(self) -> None:
        DeadLetterFactory.create()
        out, _ = cli_run("list", "--task", "record")
        assert out.splitlines() == [
            "No dead letters match.",
            f"No dead letter has --task 'record'. Did you mean {jobs.record.name!r}?",
        ]

    def test_a_queue_one_letter_off_is_suggested(self) -> None:
        DeadLetterFactory.create(queue_name="emails")
        out, _ = cli_run("list", "--queue", "email")
        assert "No dead letter has --queue 'email'. Did you mean 'emails'?" in out

    def test_no_hint_when_the_names_exist_but_other_filters_exclude(self) -> None:
        DeadLetterFactory.create(queue_name="emails")
        out, _ = cli_run("list", "--queue", "emails", "--reason", "deadline")
        assert out == "No dead letters match.\n"

    def test_django_options_may_follow_the_action(self) -> None:
        DeadLetterFactory.create()
        out, _ = cli_run("list", "--json", "--settings", "tests.settings", "-v", "2", "--traceback")
        assert len(json.loads(out)["items"]) == 1
