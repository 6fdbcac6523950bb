"""`manage.py pause` and `resume`: what an operator types, what it prints, what it refuses."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management.base import CommandError

from django_jobretry.holds import breakers
from django_jobretry.jobs import claim
from django_jobretry.jobs.claimed import release
from django_jobretry.models import Circuit, CircuitState, Pause
from tests.integration.conftest import run_command
from tests.jobs_app import jobs
from tests.manage_py import manage_py
from tests.processes import test_database_url

pytestmark = pytest.mark.django_db


def claimed() -> set[int]:
    taken = claim.claim("test", 100, 60, None)
    release(taken)
    return {job.id for job in taken}


def test_pause_holds_a_queue_until_resume() -> None:
    held = jobs.other_queue.enqueue("k")
    free = jobs.record.enqueue("k")
    out = run_command(
        "pause", "--queue", "other", "--reason", "partner down", "--actor", "alice", "--for", "2h"
    )
    assert out.splitlines()[0].startswith("queue other paused by alice until 20")
    assert out.splitlines()[1] == (
        "1 due job(s) of queue other held (ready and past their run time, as `jobstatus` counts them); "
        "jobs already running finish"
    )
    assert claimed() == {free.id}
    row = Pause.objects.get()
    assert (row.queue_name, row.reason, row.paused_by) == ("other", "partner down", "alice")
    out = run_command("resume", "--queue", "other", "--actor", "bob")
    assert out.splitlines() == [
        f"queue other resumed by bob (paused by alice since {row.paused_at.isoformat()})",
        "1 ready job(s) released",
    ]
    assert claimed() == {free.id, held.id}


def test_a_second_pause_updates_it() -> None:
    run_command("pause", "--task", jobs.record.name, "--actor", "alice")
    out = run_command("pause", "--task", jobs.record.name, "--actor", "bob", "--reason", "still down")
    assert "(it was paused already: who, why and until are updated)" in out
    assert Pause.objects.get().paused_by == "bob"


def test_a_misspelt_task_is_refused_with_the_close_name() -> None:
    with pytest.raises(CommandError) as refused:
        run_command("pause", "--task", "tests.jobs_app.jobs.recrd")
    assert refused.value.returncode == 2
    assert str(refused.value) == (
        "task 'tests.jobs_app.jobs.recrd' is not declared and no job has it, so its pause would hold "
        "nothing. Did you mean 'tests.jobs_app.jobs.record'? Add --undeployed to pause it before it is "
        "deployed."
    )
    assert not Pause.objects.exists()


def test_a_misspelt_queue_is_refused() -> None:
    with pytest.raises(CommandError, match=r"queue 'othr' is not declared .* 'other'") as refused:
        run_command("pause", "--queue", "othr")
    assert refused.value.returncode == 2
    assert not Pause.objects.exists()


def test_undeployed_pauses_a_task_nothing_knows_yet() -> None:
    err = StringIO()
    out = run_command(
        "pause", "--task", "billing.sync_invoices", "--undeployed", "--actor", "alice", stderr=err
    )
    assert out.splitlines()[0] == "task billing.sync_invoices paused by alice until resumed"
    assert err.getvalue() == ""
    assert Pause.objects.get().task_name == "billing.sync_invoices"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--queue", "other", "--until", "2000-01-01"], "until 2000-01-01T00:00:00+00:00 has passed"),
        (["--queue", ""], "queue '' is not a queue name"),
        (["--queue", "q", "--until", "9999-12-31"], "until 9999-12-31T00:00:00+00:00 is out of range"),
        (["--queue", "q\udcff"], "is not a queue name"),
        (["--task", "t\x00"], "is not a task name"),
    ],
)
def test_bad_input_is_refused_and_nothing_stored(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=re.escape(message)) as refused:
        run_command("pause", *args)
    assert refused.value.returncode == 2
    assert not Pause.objects.exists()


def test_resume_of_nothing_paused_is_exit_1() -> None:
    with pytest.raises(CommandError, match="queue other is not paused") as refused:
        run_command("resume", "--queue", "other")
    assert refused.value.returncode == 1


def test_resume_circuit_closes_a_breaker() -> None:
    breakers.hold_task(jobs.record.name, timedelta(hours=1), None, job_id=0)
    out = run_command("resume", "--circuit", jobs.record.name, "--actor", "alice")
    assert out == f"circuit of task {jobs.record.name} closed by alice; 0 held job(s) released, 10 a second\n"
    assert Circuit.objects.get().state == CircuitState.CLOSED
    with pytest.raises(CommandError, match="is not open") as refused:
        run_command("resume", "--circuit", jobs.record.name)
    assert refused.value.returncode == 1


def test_jobstatus_shows_what_is_held_in_text_and_json() -> None:
    jobs.other_queue.enqueue("k")
    run_command("pause", "--queue", "other", "--reason", "partner down", "--actor", "alice")
    breakers.hold_task(jobs.record.name, timedelta(minutes=5), None, job_id=42)
    jobs.record.enqueue("k")
    text = run_command("jobstatus")
    held = text[text.index("Held: 1 paused, 1 circuit(s) open") :].splitlines()
    assert held[2].split() == [
        "queue",
        "other",
        "paused",
        "by",
        "alice",
        "(partner",
        "down)",
        "until",
        "resumed",
        "1",
    ]
    assert held[3].startswith(f"task {jobs.record.name}")
    assert "circuit open: job 42 raised CircuitOpen for 5m00s" in held[3]
    assert held[3].split()[-3:] == ["(opening", "1)", "1"]
    found = json.loads(run_command("jobstatus", "--json"))["held"]
    assert [(p["kind"], p["name"], p["paused_by"], p["held"]) for p in found["pauses"]] == [
        ("queue", "other", "alice", 1)
    ]
    assert [(c["task"], c["state"], c["opens"], c["held"]) for c in found["circuits"]] == [
        (jobs.record.name, "open", 1, 1)
    ]


def test_jobstatus_json_has_empty_held_lists_and_no_text_section_when_nothing_is_held() -> None:
    assert json.loads(run_command("jobstatus", "--json"))["held"] == {"pauses": [], "circuits": []}
    assert "Held:" not in run_command("jobstatus")


@pytest.mark.parametrize(
    "args",
    [
        ["resume", "--circuit", "t\udcff"],
        ["resume", "--queue", "q\ud800"],
    ],
)
def test_a_name_postgresql_cannot_take_is_a_usage_error(args: list[str]) -> None:
    with pytest.raises(CommandError, match="is not a") as refused:
        run_command(*args)
    assert refused.value.returncode == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["pause", "--queue", "q", "--until", "9999-12-31"],
            "until 9999-12-31T00:00:00+00:00 is out of range",
        ),
        (["pause", "--queue", "q\udcff"], "is not a queue name"),  # argv bytes b"q\xff": not UTF-8
        (["pause", "--task", "t\udcff"], "is not a task name"),
        (["pause", "--task", "tests.jobs_app.jobs.recrd"], "Did you mean 'tests.jobs_app.jobs.record'?"),
        (["resume", "--queue", "q\udcff"], "is not a queue name"),
        (["resume", "--circuit", "t\udcff"], "is not a task name"),
    ],
)
def test_as_a_shell_runs_it_a_bad_value_is_one_line_and_exit_2(args: list[str], said: str) -> None:
    done = manage_py(
        *args, env={"DATABASE_URL": test_database_url(), "DJANGO_SETTINGS_MODULE": "tests.settings"}
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("CommandError: "), line
    assert said in line, line
    assert not Pause.objects.exists()
