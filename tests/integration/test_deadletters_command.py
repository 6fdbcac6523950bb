"""`manage.py deadletters`: listing, show, guarded requeue/discard, confirmation, pacing, exit codes.

In-process tests use call_command (fake terminal, fake clock); exit codes and the
no-TTY refusal are also checked on real `manage.py` processes against the test
database, which need committed rows (transaction=True).
"""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import DurationField, Value
from django.db.models.functions import Now

from django_jobretry import FatalError
from django_jobretry.management import deadletter_cli as cli
from django_jobretry.management.arguments import rate
from django_jobretry.models import DeadLetter, DeadReason, Job
from django_jobretry.services import transitions
from django_jobretry.services.history import AttemptEnd
from django_jobretry.services.outcomes import Failed, Recorder
from tests.factories import DeadLetterFactory
from tests.jobs_app import jobs
from tests.processes import ROOT, test_database_url

OTHER_TASK = "tests.jobs_app.jobs.other_queue"


class Terminal(io.StringIO):
    """A stdin that claims to be a terminal, with the operator's answer typed in."""

    def isatty(self) -> bool:
        return True


class FakeClock:
    """A monotonic clock that only moves when the command sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def cli_run(*args: str, **options: Any) -> tuple[str, str]:
    """call_command; returns (stdout, stderr); a non-zero exit raises CommandError."""
    out, err = io.StringIO(), io.StringIO()
    call_command("deadletters", *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def exit_code(*args: str, **options: Any) -> tuple[int, str]:
    """The command's exit code and error message, in process."""
    with pytest.raises(CommandError) as info:
        cli_run(*args, **options)
    return info.value.returncode, str(info.value)


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
        assert listed("--error-class", "ConnectionResetError") == []  # exact match only
        assert listed("--older-than", "2d") == [fatal.pk]
        assert listed("--older-than", "4d") == []
        assert listed("--queue", "default", "--reason", "deadline") == [other.pk]

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
            "Error history (3 attempt(s) recorded)",
            "attempt 1 at ",
            "retried after 10ms",
            "attempt 3 at ",
            "builtins.ConnectionResetError: upstream reset for k",
            "| Traceback (most recent call last):",
            "Requeue history (never requeued)",
        ):
            assert fragment in out

    def test_requeue_history_of_a_job_that_died_again(self) -> None:
        jobs.fatal.enqueue("twice")
        [claimed] = transitions.claim("w", 1, 30, None)
        Recorder("w", object).record_failure(Failed(claimed, FatalError("first"), AttemptEnd.ERROR))
        first = DeadLetter.objects.get()
        cli_run("requeue", str(first.pk), "--actor", "alice")
        [claimed] = transitions.claim("w", 1, 30, None)
        Recorder("w", object).record_failure(Failed(claimed, FatalError("second"), AttemptEnd.ERROR))
        second = DeadLetter.objects.get()
        out, _ = cli_run("show", str(second.pk))
        assert "requeued:      1 time(s) before" in out
        assert "Requeue history (1)" in out
        assert f"by alice: from dead letter {first.pk} (job {first.job_id}, fatal after 1 attempt(s)" in out
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
class TestRequeue:
    def test_by_id_makes_a_job_with_provenance(self) -> None:
        dead = DeadLetterFactory.create(args=["again"])
        out, _ = cli_run("requeue", str(dead.pk), "--actor", "alice")
        job = Job.objects.get()
        assert out.splitlines() == [
            f"requeued dead letter {dead.pk} as job {job.pk}",
            "requeued 1 of 1 dead letter",
        ]
        assert (job.args, job.requeue_count, job.requeue_history[0]["by"]) == (["again"], 1, "alice")
        assert not DeadLetter.objects.exists()

    def test_actor_defaults_to_the_os_user(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr("getpass.getuser", lambda: "opsuser")
        cli_run("requeue", str(DeadLetterFactory.create().pk))
        assert Job.objects.get().requeue_history[0]["by"] == "opsuser"

    def test_run_after_delays_the_new_job(self) -> None:
        cli_run("requeue", str(DeadLetterFactory.create().pk), "--run-after", "1h")
        job = Job.objects.get()
        assert job.run_at - job.enqueued_at > timedelta(minutes=59)

    def test_all_with_filters_acts_only_on_matches(self) -> None:
        emails = DeadLetterFactory.create_batch(3, queue_name="emails")
        DeadLetterFactory.create(queue_name="emails", reason=DeadReason.EXHAUSTED, attempts=3)
        kept = DeadLetterFactory.create()
        out, _ = cli_run("requeue", "--all", "--queue", "emails", "--reason", "fatal", "--yes")
        assert out == "requeued 3 of 3 dead letters\n"
        assert DeadLetter.objects.count() == 2
        assert DeadLetter.objects.filter(pk=kept.pk).exists()
        requeued = [
            history[0]["dead_letter_id"] for history in Job.objects.values_list("requeue_history", flat=True)
        ]
        assert sorted(requeued) == sorted(d.pk for d in emails)

    def test_all_asks_for_confirmation(self) -> None:
        DeadLetterFactory.create_batch(2)
        code, message = exit_code("requeue", "--all", stdin=Terminal("n\n"))
        assert code == cli.EXIT_USAGE
        assert "not confirmed" in message
        assert (DeadLetter.objects.count(), Job.objects.count()) == (2, 0)
        out, err = cli_run("requeue", "--all", stdin=Terminal("y\n"))
        assert err == "Requeue 2 dead letters? [y/N] "
        assert out == "requeued 2 of 2 dead letters\n"
        assert (DeadLetter.objects.count(), Job.objects.count()) == (0, 2)

    def test_several_ids_do_not_ask(self) -> None:
        dead = DeadLetterFactory.create_batch(2)
        out, err = cli_run("requeue", *(str(d.pk) for d in dead), stdin=Terminal(""))
        assert err == ""
        assert out.endswith("requeued 2 of 2 dead letters\n")

    def test_all_matching_nothing_exits_3(self) -> None:
        DeadLetterFactory.create()
        code, message = exit_code("requeue", "--all", "--queue", "emails", "--yes")
        assert code == cli.EXIT_NOTHING
        assert "no dead letter matches the filters" in message
        assert Job.objects.count() == 0

    def test_already_handled_and_conflicts_exit_1_and_the_rest_is_done(self) -> None:
        gone, ok, clash = DeadLetterFactory.create_batch(3)
        DeadLetter.objects.filter(pk=clash.pk).update(unique_key="invoice-7")
        jobs.record.using(unique_key="invoice-7").enqueue("live")
        cli_run("discard", str(gone.pk))
        out = io.StringIO()
        with pytest.raises(CommandError) as info:
            call_command("deadletters", "requeue", str(gone.pk), str(ok.pk), str(clash.pk), stdout=out)
        assert info.value.returncode == cli.EXIT_PARTIAL
        assert str(info.value) == "2 of 3 dead letters not requeued"
        assert out.getvalue().splitlines()[-1] == (
            f"requeued 1 of 3 dead letters; already handled by someone else (or never existed): {gone.pk}; "
            f"not requeued, a live job holds the same unique_key: {clash.pk}"
        )
        assert list(DeadLetter.objects.values_list("pk", flat=True)) == [clash.pk]

    def test_interrupt_reports_what_was_done(self) -> None:
        DeadLetterFactory.create_batch(3)
        clock = FakeClock()

        def interrupt(seconds: float) -> None:
            raise KeyboardInterrupt

        out = io.StringIO()
        with pytest.raises(CommandError) as info:
            call_command(
                "deadletters",
                "requeue",
                "--all",
                "--yes",
                "--rate",
                "1/s",
                clock=clock,
                sleep=interrupt,
                stdout=out,
            )
        assert info.value.returncode == cli.EXIT_INTERRUPTED
        assert out.getvalue() == "requeued 1 of 3 dead letters\n"
        assert (DeadLetter.objects.count(), Job.objects.count()) == (2, 1)


@pytest.mark.django_db
class TestRate:
    @pytest.mark.parametrize(
        ("rate", "count", "sleeps"),
        [
            ("2/s", 5, [0.5] * 4),  # one at a time, every half second
            ("30/m", 3, [2.0] * 2),
            ("100/s", 25, [0.1] * 2),  # small batches of 10, ten a second
        ],
    )
    def test_requeue_is_paced(self, rate: str, count: int, sleeps: list[float]) -> None:
        DeadLetterFactory.create_batch(count)
        clock = FakeClock()
        out, _ = cli_run("requeue", "--all", "--yes", "--rate", rate, clock=clock, sleep=clock.sleep)
        assert clock.sleeps == pytest.approx(sleeps)
        assert out == f"requeued {count} of {count} dead letters\n"
        assert Job.objects.count() == count

    def test_unpaced_never_sleeps(self) -> None:
        DeadLetterFactory.create_batch(3)
        clock = FakeClock()
        cli_run("requeue", "--all", "--yes", clock=clock, sleep=clock.sleep)
        assert clock.sleeps == []

    def test_slow_work_is_not_followed_by_extra_sleep(self) -> None:
        pacer = cli.Pacer(2, clock=(clock := FakeClock()), sleep=clock.sleep)
        pacer.wait(1)
        clock.now += 3  # the first item took longer than the pace
        pacer.wait(1)
        pacer.wait(1)
        assert clock.sleeps == [0.5]

    def test_progress_bar_on_request(self) -> None:
        DeadLetterFactory.create_batch(5)
        clock = FakeClock()
        _, err = cli_run(
            "requeue", "--all", "--yes", "--rate", "2/s", "--progress", clock=clock, sleep=clock.sleep
        )
        assert err.count("\rrequeue [") == 5
        assert err.endswith("\rrequeue [" + "#" * 30 + "] 5/5\n")
        assert "] 2/5" in err

    def test_no_progress_bar_when_stderr_is_not_a_terminal(self) -> None:
        DeadLetterFactory.create_batch(2)
        assert cli_run("discard", "--all", "--yes")[1] == ""


@pytest.mark.django_db
class TestDiscard:
    def test_one_id_needs_no_confirmation(self) -> None:
        dead = DeadLetterFactory.create()
        out, err = cli_run("discard", str(dead.pk), "--actor", "bob")
        assert (out, err) == (f"discarded dead letter {dead.pk}\ndiscarded 1 of 1 dead letter\n", "")
        assert not DeadLetter.objects.exists()

    def test_several_ids_ask_and_no_terminal_refuses(self) -> None:
        dead = DeadLetterFactory.create_batch(2)
        ids = [str(d.pk) for d in dead]
        code, message = exit_code("discard", *ids, stdin=io.StringIO("y\n"))
        assert code == cli.EXIT_USAGE
        assert "refusing to discard 2 dead letters without confirmation: stdin is not a terminal" in message
        assert DeadLetter.objects.count() == 2
        _, err = cli_run("discard", *ids, stdin=Terminal("yes\n"))
        assert err == "Discard 2 dead letters? [y/N] "
        assert not DeadLetter.objects.exists()

    def test_yes_skips_the_question(self) -> None:
        DeadLetterFactory.create_batch(3)
        assert cli_run("discard", "--all", "--yes", stdin=io.StringIO("")) == (
            "discarded 3 of 3 dead letters\n",
            "",
        )
        assert not DeadLetter.objects.exists()

    def test_already_handled_is_exit_1(self) -> None:
        kept, gone = DeadLetterFactory.create_batch(2)
        cli_run("requeue", str(gone.pk))
        code, message = exit_code("discard", str(kept.pk), str(gone.pk), "--yes")
        assert (code, message) == (cli.EXIT_PARTIAL, "1 of 2 dead letters not discarded")
        assert not DeadLetter.objects.exists()


@pytest.mark.django_db
class TestDryRun:
    def test_writes_nothing_and_counts(self) -> None:
        dead = DeadLetterFactory.create_batch(3, queue_name="emails")
        DeadLetterFactory.create()
        out, err = cli_run("requeue", "--all", "--queue", "emails", "--dry-run", stdin=io.StringIO(""))
        lines = out.splitlines()
        assert lines[0] == "Would requeue:"
        assert sorted(int(line.split()[0]) for line in lines[2:-1]) == sorted(d.pk for d in dead)
        assert lines[-1] == "dry run: would requeue 3 dead letters; nothing was changed"
        assert err == ""
        out, _ = cli_run("discard", "--all", "--dry-run")
        assert out.splitlines()[-1] == "dry run: would discard 4 dead letters; nothing was changed"
        assert (DeadLetter.objects.count(), Job.objects.count()) == (4, 0)

    def test_predicts_already_handled_and_conflicts_with_the_real_exit_code(self) -> None:
        ok, clash, twin = DeadLetterFactory.create_batch(3)
        DeadLetter.objects.filter(pk__in=[clash.pk, twin.pk]).update(unique_key="k-1")
        code, _ = exit_code("requeue", str(ok.pk), str(clash.pk), str(twin.pk), "999999999", "--dry-run")
        assert code == cli.EXIT_PARTIAL
        out = io.StringIO()
        with pytest.raises(CommandError):
            call_command(
                "deadletters",
                "requeue",
                str(ok.pk),
                str(clash.pk),
                str(twin.pk),
                "999999999",
                "--dry-run",
                stdout=out,
            )
        assert out.getvalue().splitlines()[-1] == (
            "dry run: would requeue 2 dead letters; already handled (or never existed): 999999999; "
            f"would not requeue, a live job holds the same unique_key: {twin.pk}; nothing was changed"
        )
        assert (DeadLetter.objects.count(), Job.objects.count()) == (3, 0)

    def test_all_matching_nothing_exits_3(self) -> None:
        assert exit_code("discard", "--all", "--dry-run")[0] == cli.EXIT_NOTHING

    def test_long_selections_are_abbreviated(self) -> None:
        DeadLetterFactory.create_batch(53)
        out, _ = cli_run("discard", "--all", "--dry-run")
        assert len(out.splitlines()) == 1 + 1 + 50 + 1 + 1
        assert "... and 3 more" in out
        out, _ = cli_run("discard", "--all", "--dry-run", verbosity=2)
        assert len(out.splitlines()) == 1 + 1 + 53 + 1


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
            (["requeue", "--all", "--rate", "10/h"], "'10/h' is not a rate like 10/s or 30/m"),
            (["requeue", "--all", "--rate", "0/s"], "'0/s' is not a positive rate"),
            (["requeue", "--all", "--rate", "fast"], "'fast' is not a rate"),
            (["discard", "--all", "--rate=1/s"], "unrecognized arguments: --rate=1/s"),
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
