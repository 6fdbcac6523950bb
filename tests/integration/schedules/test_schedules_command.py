"""`manage.py schedules`, in process: the list, --check, pause / resume / run, and the operator's mistakes.

The schedules are in the states of tests/integration/schedules/schedule_story.py,
reached through the real services; every action is checked on the rows it
changes, and every refusal by its exit code and one clear line.
"""

from __future__ import annotations

import getpass
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.checks import CheckMessage, Error
from django.core.checks.registry import registry
from django.core.management import call_command
from django.core.management.base import CommandError

from django_jobretry.models import Job, Schedule
from django_jobretry.schedules.status import utc, zoned
from tests.integration.conftest import refused, run_command
from tests.integration.schedules.schedule_story import DECLARED, PAUSE_REASON, SECRET, Story, declare, story
from tests.processes import ROOT, test_database_url

pytestmark = pytest.mark.django_db


def line_of(text: str, name: str) -> str:
    [line] = [line for line in text.splitlines() if line.startswith(f"{name} ") or line == name]
    return line


@pytest.fixture
def told(settings: Any) -> Story:
    return story(settings)


def test_lists_every_declared_schedule_and_every_row_one_per_line(told: Story) -> None:
    text = run_command("schedules")
    lines = text.splitlines()
    assert lines[0].split()[:5] == ["schedule", "task", "cadence", "next", "slot"]
    assert [line.split()[0] for line in lines[1:]] == ["hourly", "nightly", "retired", "tick"]
    nightly = told.row("nightly")
    berlin = line_of(text, "nightly")
    assert "tests.jobs_app.jobs.fatal" in berlin
    assert "cron 0 3 * * * Europe/Berlin" in berlin
    assert f"{zoned(nightly.next_slot, 'Europe/Berlin')} ({utc(nightly.next_slot)})" in berlin
    assert nightly.last_slot is not None
    assert f"{utc(nightly.last_slot)} dead letter {told.dead_letter_id}: dead (fatal)" in berlin
    assert "never" in berlin  # no success
    tick = line_of(text, "tick")
    assert f"job {told.succeeded_job_id}: succeeded" in tick
    assert " ago)" in tick
    assert tick.split()[-5:] == ["1", "0", "0", "0", "-"]  # runs, skipped, missed, refused, not paused
    assert f"by alice: {PAUSE_REASON}" in line_of(text, "hourly")
    assert line_of(text, "retired").startswith("retired (not declared in this deploy)")
    assert SECRET not in text


def test_a_declared_schedule_no_worker_started_is_listed_with_its_first_slot(settings: Any) -> None:
    declare(settings)
    text = run_command("schedules")
    assert [line.split()[0] for line in text.splitlines()[1:]] == ["hourly", "nightly", "tick"]
    assert "(no worker has started it yet)" in line_of(text, "tick")
    assert not Schedule.objects.exists()  # listing writes nothing


def test_nothing_declared_and_no_row_says_so() -> None:
    assert run_command("schedules").startswith("No schedules: none is declared")


def test_pause_resume_and_run_record_the_os_user(told: Story) -> None:
    user = getpass.getuser()
    assert run_command("schedules", "pause", "tick", "--reason", "deploy") == (
        f"schedule tick paused by {user}: no run starts until resumed\n"
    )
    row = told.row("tick")
    assert (row.paused_by, row.pause_reason, row.paused_at is not None) == (user, "deploy", True)
    assert "was already paused" in run_command("schedules", "pause", "tick")
    assert told.row("tick").pause_reason == "deploy"  # the first pause's reason stays
    assert run_command("schedules", "resume", "tick") == f"schedule tick resumed by {user}\n"
    assert told.row("tick").paused_at is None
    assert run_command("schedules", "resume", "tick") == "schedule tick was not paused: nothing changed\n"
    out = run_command("schedules", "run", "tick", "--actor", "ops-bot")
    [job] = Job.objects.filter(schedule_name="tick", status="ready")
    assert out == f"schedule tick: run now by ops-bot as job {job.pk}\n"
    assert told.row("tick").last_job_id == job.pk


def test_a_run_the_overlap_policy_refuses_exits_1_naming_the_live_run(told: Story) -> None:
    run_command("schedules", "run", "tick")
    live = Job.objects.get(schedule_name="tick", status="ready")
    code, message = refused("schedules", "run", "tick")
    assert code == 1
    assert message == f"not run: schedule 'tick' has a run still ready, running or retrying (job {live.pk})"
    assert Job.objects.filter(schedule_name="tick", status="ready").count() == 1


@pytest.mark.parametrize("action", ["pause", "resume", "run"])
def test_an_unknown_name_exits_2_with_a_did_you_mean(told: Story, action: str) -> None:
    code, message = refused("schedules", action, "nigthly")
    assert code == 2
    assert message == "no schedule 'nigthly' is declared in this process. Did you mean 'nightly'?"


def test_a_row_left_from_an_older_deploy_is_refused_saying_why(told: Story) -> None:
    code, message = refused("schedules", "pause", "retired")
    assert code == 2
    assert "Its row is left from a deploy that declared it" in message
    assert told.row("retired").paused_at is None


def test_a_schedule_whose_task_is_not_registered_here_cannot_run(settings: Any) -> None:
    declare(settings, ghost={"task": "tests.jobs_app.jobs.no_such_task", "every": 60})
    code, message = refused("schedules", "run", "ghost")
    assert code == 1
    assert message == (
        "schedule 'ghost' cannot make a run in this deploy: task 'tests.jobs_app.jobs.no_such_task' is "
        "not registered in this process (see `manage.py schedules --check`)"
    )
    assert not Job.objects.exists()


def test_usage_errors_say_what_is_allowed(told: Story) -> None:
    # In process, argparse's refusals are CommandErrors; a shell sees exit code 2 (TestProcess).
    _, message = refused("schedules", "pause", "tick", "--reason", "x" * 501)
    assert message == "Error: argument --reason: is 501 characters long; at most 500 are kept"
    assert told.row("tick").paused_at is None
    code, message = refused("schedules", "--check", "run", "tick")
    assert code == 2
    assert message == "--check goes without an action, not with run"


def test_check_passes_when_every_declaration_is_right(settings: Any) -> None:
    declare(settings)
    assert run_command("schedules", "--check") == "3 declared schedules: no problem found.\n"


@pytest.fixture
def registered() -> Iterator[list[Any]]:
    """Checks registered for one test only, beside the project's."""
    added: list[Any] = []
    yield added
    for check in added:
        registry.registered_checks.discard(check)


def test_check_reports_the_schedule_checks_and_only_them(registered: list[Any]) -> None:
    """The wiring, whatever the checks say: E04x errors are printed and exit 1, other ids are not ours."""

    def fake(**kwargs: Any) -> list[CheckMessage]:
        return [
            Error(
                "schedule 'a': cron='61 * * * *' is invalid",
                hint="e.g. '0 3 * * *'",
                id="django_jobretry.E040",
            ),
            Error("schedule 'b': task 'x.y' is not registered", id="django_jobretry.E042"),
            Error("something else entirely", id="django_jobretry.E001"),
        ]

    registry.register(fake)
    registered.append(fake)
    out = io.StringIO()
    with pytest.raises(CommandError) as info:
        call_command("schedules", "--check", stdout=out)
    assert info.value.returncode == 1
    assert out.getvalue().splitlines() == [
        "django_jobretry.E040: schedule 'a': cron='61 * * * *' is invalid",
        "    HINT: e.g. '0 3 * * *'",
        "django_jobretry.E042: schedule 'b': task 'x.y' is not registered",
    ]


def test_check_exits_1_naming_each_wrong_declaration(settings: Any) -> None:
    """With the project's own checks (schedules/checks.py)."""
    pytest.importorskip("django_jobretry.schedules.checks", reason="the schedule checks E040-E043")
    declare(
        settings,
        typo={"task": "tests.jobs_app.jobs.record", "cron": "61 * * * *", "args": ["k"]},
        lost={"task": "tests.jobs_app.jobs.recrod", "every": 60, "args": ["k"]},
    )
    out = io.StringIO()
    with pytest.raises(CommandError) as info:
        call_command("schedules", "--check", stdout=out)
    assert info.value.returncode == 1
    assert "schedule declaration problems (above)" in str(info.value)
    text = out.getvalue()
    lines = [line for line in text.splitlines() if line.startswith("django_jobretry.E04")]
    assert any("typo" in line and "61 * * * *" in line for line in lines), text
    assert any("lost" in line and "recrod" in line for line in lines), text
    assert not any("'tick'" in line or "'nightly'" in line for line in lines), text


@pytest.mark.django_db(transaction=True)
class TestProcess:
    """As a shell runs it: the exit code, one line on stderr, never a traceback."""

    def run(self, *args: str, **extra: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        env = {
            "DATABASE_URL": test_database_url(),
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "JOBRETRY_TEST_SCHEDULES": json.dumps({**DECLARED, **extra}),
        }
        return subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "schedules", *args],
            cwd=ROOT,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def test_an_unknown_name_and_a_bad_option_exit_2_in_one_line(self) -> None:
        unknown = self.run("pause", "nigthly", "--reason", "deploy")
        assert unknown.returncode == 2, unknown.stderr
        assert unknown.stderr == (
            "CommandError: no schedule 'nigthly' is declared in this process. Did you mean 'nightly'?\n"
        )
        too_long = self.run("pause", "nightly", "--reason", "x" * 501)
        assert too_long.returncode == 2, too_long.stderr
        assert "argument --reason: is 501 characters long; at most 500 are kept" in too_long.stderr
        assert "Traceback" not in unknown.stderr + too_long.stderr
        assert not Schedule.objects.exists()

    @pytest.mark.parametrize("action", ["run", "pause", "resume"])
    @pytest.mark.parametrize("name", ["night\udcffly", "\udcff\udcfe", "nightly\x01"])
    def test_a_name_that_is_not_utf8_exits_2_in_one_line(self, action: str, name: str) -> None:
        """A name in bytes that are not UTF-8 reaches Python as lone surrogates, which PostgreSQL refuses."""
        done = self.run(action, name)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        [line] = done.stderr.splitlines()
        assert line.startswith("CommandError: no schedule "), line
        assert not Schedule.objects.exists()

    def test_a_wrong_declaration_does_not_hide_the_list_of_the_others(self) -> None:
        """Django's checks do not run first: in an incident the list shows, whatever is wrong."""
        typo = {"task": "tests.jobs_app.jobs.record", "cron": "61 * * * *", "args": ["k"]}
        listed = self.run(typo=typo)
        assert (listed.returncode, listed.stderr) == (0, "")
        assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == ["hourly", "nightly", "tick"]
