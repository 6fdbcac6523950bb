"""`manage.py jobstatus`, in process: text for people, JSON for scripts, never a job's arguments.

Rows are set up with the factories; real workers registering themselves are
in test_worker_registry_processes.py and tests/features/operators.feature.
"""

from __future__ import annotations

import itertools
import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from django_jobretry import console
from django_jobretry.display import UNSAFE
from tests.factories import DeadLetterFactory, JobFactory, WorkerProcessFactory, error_history
from tests.integration.conftest import run_command

pytestmark = pytest.mark.django_db

SECRET = "hunter2"  # noqa: S105


def as_json() -> dict[str, Any]:
    value: dict[str, Any] = json.loads(run_command("jobstatus", "--json"))
    return value


@pytest.fixture
def incident() -> dict[str, Any]:
    """default: 2 ready (due 2 minutes ago), 1 retrying, 1 running, 1 dead; mail: 1 dead; two workers."""
    JobFactory.create_batch(2, run_at=timezone.now() - timedelta(minutes=2), args=[SECRET])
    JobFactory.create(
        attempts=1, errors=error_history(1, "exhausted"), run_at=timezone.now() + timedelta(minutes=1)
    )
    running = JobFactory.create(running=True, started_at=timezone.now() - timedelta(minutes=5))
    DeadLetterFactory.create(kwargs={"password": SECRET})
    DeadLetterFactory.create(exhausted=True, queue_name="mail")
    live = WorkerProcessFactory.create(queues=["default"], running_jobs=1)
    lost = WorkerProcessFactory.create(lost=True, host="gone-host")
    return {"running": running, "live": live, "lost": lost}


def test_json_for_scripts(incident: dict[str, Any]) -> None:
    report = as_json()
    default, mail = report["queues"]
    assert (default["queue"], default["ready"], default["retrying"], default["running"], default["dead"]) == (
        "default",
        2,
        1,
        1,
        1,
    )
    assert default["oldest_due_seconds"] >= 120
    assert default["longest_running_seconds"] >= 300
    assert default["longest_running_job_id"] == incident["running"].pk
    assert default["more_than_limit"] == []
    assert (mail["queue"], mail["dead"], mail["oldest_due_seconds"], mail["longest_running_job_id"]) == (
        "mail",
        1,
        None,
        None,
    )
    assert report["totals"] == {"ready": 2, "retrying": 1, "running": 1, "dead": 2, "more_than_limit": []}
    assert report["dead_by_reason"]["fatal"] == 1
    assert report["dead_by_reason"]["exhausted"] == 1
    assert (report["workers_live"], report["workers_lost"]) == (1, 1)
    live, lost = report["workers"]
    assert (live["worker_id"], live["status"], live["queues"], live["running_jobs"]) == (
        incident["live"].worker_id,
        "live",
        ["default"],
        1,
    )
    assert (lost["worker_id"], lost["status"], lost["host"]) == (
        incident["lost"].worker_id,
        "lost",
        "gone-host",
    )
    assert lost["heartbeat_age_seconds"] > lost["lease_seconds"]
    assert report["count_limit"] == console.COUNT_LIMIT


def test_text_for_people(incident: dict[str, Any]) -> None:
    text = run_command("jobstatus")
    lines = text.splitlines()
    assert lines[0].startswith("As of ")
    header = next(line for line in lines if line.startswith("queue"))
    assert header.split() == [
        "queue",
        "ready",
        "retrying",
        "running",
        "dead",
        "oldest",
        "due",
        "longest",
        "running",
    ]
    default = next(line for line in lines if line.startswith("default"))
    assert default.split()[:5] == ["default", "2", "1", "1", "1"]
    assert f"(job {incident['running'].pk})" in default
    assert any(line.split()[:5] == ["all", "queues", "2", "1", "1"] for line in lines)
    assert "Workers: 1 live, 1 lost" in text
    lost = next(line for line in lines if incident["lost"].worker_id in line)
    assert lost.startswith("LOST")
    assert "ago" in lost


def test_never_prints_arguments(incident: dict[str, Any]) -> None:
    assert SECRET not in run_command("jobstatus")
    assert SECRET not in run_command("jobstatus", "--json")


def test_counts_that_stop_at_the_limit_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "COUNT_LIMIT", 2)
    JobFactory.create_batch(3)
    report = as_json()
    assert report["queues"][0]["ready"] == 2
    assert report["queues"][0]["more_than_limit"] == ["ready"]
    assert "2+" in run_command("jobstatus")


def test_an_empty_installation() -> None:
    text = run_command("jobstatus")
    assert "No jobs and no dead letters." in text
    assert "Workers: 0 live, 0 lost" in text
    assert "No worker has registered" in text
    report = as_json()
    assert (report["queues"], report["workers"]) == ([], [])


#: What a terminal acts on: ESC sequences (retitle the window, clear the screen), BEL, CR, bidi overrides.
HOSTILE = "\x1b]0;owned\x07\x1b[2J\rfake\u202egnp.exe\u2066x\u2069"


def test_names_from_the_database_never_drive_the_terminal() -> None:
    """Worker ids, hosts, pools and queue names are printed neutralised; --json keeps them exact."""
    WorkerProcessFactory.create(
        worker_id=f"w{HOSTILE}", host=f"h{HOSTILE}", queues=[f"q{HOSTILE}"], pool=f"p{HOSTILE}"[:16]
    )
    job = JobFactory.create()
    with connection.cursor() as cursor:  # past enqueue's validation, as a hand-written UPDATE would be
        cursor.execute(
            "UPDATE django_jobretry_job SET queue_name = %s WHERE id = %s", [f"q{HOSTILE}", job.pk]
        )
    text = run_command("jobstatus")
    assert not UNSAFE.search(text.replace("\n", ""))
    assert text.count("\\x1b]0;owned\\x07\\x1b[2J\\x0dfake\\u202egnp.exe\\u2066x\\u2069") == 3
    raw = run_command("jobstatus", "--json")
    assert not UNSAFE.search(raw.replace("\n", ""))
    report = json.loads(raw)
    assert report["queues"][0]["queue"] == f"q{HOSTILE}"
    [worker] = report["workers"]
    assert (worker["worker_id"], worker["host"], worker["queues"]) == (
        f"w{HOSTILE}",
        f"h{HOSTILE}",
        [f"q{HOSTILE}"],
    )


# --- schedules (tests/integration/schedules/schedule_story.py) --------------------------------------


def test_a_schedules_section_per_schedule_next_slot_last_success_counts_and_pause(settings: Any) -> None:
    from django_jobretry.schedules.status import utc, zoned
    from tests.integration.schedules.schedule_story import PAUSE_REASON, story
    from tests.integration.schedules.schedule_story import SECRET as SCHEDULE_SECRET

    told = story(settings)
    text = run_command("jobstatus")
    section = text.split("\nSchedules: ", 1)[1].splitlines()
    assert section[0] == "4, 1 paused"
    assert " ".join(section[1].split()) == "schedule next slot last success runs skipped missed paused"
    rows = {
        line.split()[0]: line for line in itertools.takewhile(str.strip, section[2:])
    }  # to the next section
    assert list(rows) == ["hourly", "nightly", "retired", "tick"]
    nightly = told.row("nightly")
    assert f"{zoned(nightly.next_slot, 'Europe/Berlin')} ({utc(nightly.next_slot)})" in rows["nightly"]
    assert "never" in rows["nightly"]
    tick = told.row("tick")
    assert tick.last_success_at is not None
    assert f"{utc(tick.last_success_at)} (" in rows["tick"]
    assert " ago)" in rows["tick"]
    assert rows["tick"].split()[-4:] == ["1", "0", "0", "-"]  # runs, skipped, missed, not paused
    assert f"by alice: {PAUSE_REASON}" in rows["hourly"]
    assert "(not declared in this deploy)" in rows["retired"]
    assert SCHEDULE_SECRET not in text


def test_the_json_has_a_schedules_list(settings: Any) -> None:
    from tests.integration.schedules.schedule_story import story

    told = story(settings)
    report = as_json()
    by_name = {entry["name"]: entry for entry in report["schedules"]}
    assert list(by_name) == ["hourly", "nightly", "retired", "tick"]
    nightly = by_name["nightly"]
    assert (nightly["time_zone"], nightly["last_outcome"], nightly["last_dead_letter_id"]) == (
        "Europe/Berlin",
        "dead",
        told.dead_letter_id,
    )
    assert (nightly["last_success_at"], nightly["period_seconds"], nightly["runs"]) == (None, 86_400.0, 1)
    tick = by_name["tick"]
    assert (tick["last_outcome"], tick["last_job_id"], tick["period_seconds"]) == (
        "succeeded",
        told.succeeded_job_id,
        300.0,
    )
    assert tick["last_success_age_seconds"] >= 0
    hourly = by_name["hourly"]
    assert (hourly["paused"], hourly["paused_by"]) == (True, "alice")
    assert (by_name["retired"]["declared"], by_name["retired"]["time_zone"]) == (False, None)


def test_no_schedules_no_section_and_an_empty_list() -> None:
    assert "Schedules" not in run_command("jobstatus")
    assert as_json()["schedules"] == []


def test_a_pause_reason_never_drives_the_terminal(settings: Any) -> None:
    from django_jobretry.schedules import declared
    from django_jobretry.schedules.rows import declare_rows, pause
    from tests.integration.schedules.schedule_story import declare

    declare(settings)
    declare_rows(declared())
    pause("tick", actor=f"a{HOSTILE}", reason=f"r{HOSTILE}")
    text = run_command("jobstatus")
    assert not UNSAFE.search(text.replace("\n", ""))
    assert text.count("\\x1b]0;owned\\x07\\x1b[2J\\x0dfake\\u202egnp.exe\\u2066x\\u2069") == 2
    [tick] = [entry for entry in as_json()["schedules"] if entry["name"] == "tick"]
    assert (tick["paused_by"], tick["pause_reason"]) == (f"a{HOSTILE}", f"r{HOSTILE}")
