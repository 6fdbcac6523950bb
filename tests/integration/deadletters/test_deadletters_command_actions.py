"""`manage.py deadletters requeue` and `discard`: guarded bulk actions, confirmation, pacing, dry runs.

In-process tests through call_command (tests/integration/conftest.py's
``cli_run``) with a fake terminal and a fake clock; the same exit codes and the
no-TTY refusal on real `manage.py` processes are in test_deadletters_command_exits.py.
"""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from django_jobretry.deadletters import cli_bulk as cli
from django_jobretry.deadletters.cli_bulk import Pacer
from django_jobretry.models import DeadLetter, DeadReason, Job
from tests.factories import DeadLetterFactory
from tests.integration.conftest import cli_run, exit_code
from tests.jobs_app import jobs


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
            f"not requeued, another job holds the same unique_key: {clash.pk}"
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

    def test_discard_is_paced_too(self) -> None:
        DeadLetterFactory.create_batch(3)
        clock = FakeClock()
        out, _ = cli_run("discard", "--all", "--yes", "--rate", "2/s", clock=clock, sleep=clock.sleep)
        assert clock.sleeps == pytest.approx([0.5] * 2)
        assert out == "discarded 3 of 3 dead letters\n"
        assert DeadLetter.objects.count() == 0

    def test_unpaced_never_sleeps(self) -> None:
        DeadLetterFactory.create_batch(3)
        clock = FakeClock()
        cli_run("requeue", "--all", "--yes", clock=clock, sleep=clock.sleep)
        assert clock.sleeps == []

    def test_slow_work_is_not_followed_by_extra_sleep(self) -> None:
        pacer = Pacer(2, clock=(clock := FakeClock()), sleep=clock.sleep)
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
            f"would not requeue, another job holds the same unique_key: {twin.pk}; nothing was changed"
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
