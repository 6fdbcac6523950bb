"""Steps of progress.feature: real workers run the jobs; jobstatus, the admin and `deadletters show` read.

The jobs are tests/jobs_app/progress_jobs.py. A running job waits until the
scenario lets it go (an Execution row), so what is read while it runs is read
while it runs. Waits poll the database with a deadline.
"""

from __future__ import annotations

import io
import json
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.features.test_dead_letters import run_until_idle
from tests.jobs_app import progress_jobs
from tests.jobs_app.models import Execution
from tests.processes import finish, spawn_worker, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

scenarios("progress.feature")

KEY = "long"


@dataclass
class Desk:
    """The scenario's worker and job."""

    worker: subprocess.Popen[str] | None = None
    job_id: int = 0
    note: str = ""


@pytest.fixture
def desk(workers: list[subprocess.Popen[str]]) -> Desk:
    return Desk()


def page(admin_user: Any, url: str) -> str:
    client = Client()
    client.force_login(admin_user)
    response = client.get(url)
    assert response.status_code == 200
    return str(response.content.decode())


def job_page(admin_user: Any, job_id: int) -> str:
    return page(admin_user, reverse("admin:django_jobretry_job_change", args=[job_id]))


def jobstatus(*args: str) -> str:
    out = io.StringIO()
    call_command("jobstatus", *args, stdout=out)
    return out.getvalue()


@given(parsers.parse('a long job that has reported {done:d} of {total:d} rows, "{note}", under a worker'))
def long_job(desk: Desk, workers: list[subprocess.Popen[str]], done: int, total: int, note: str) -> None:
    desk.job_id, desk.note = progress_jobs.reports_then_waits.enqueue(KEY, done, total, note).pk, note
    workers.append(worker := spawn_worker("--concurrency", "1", "--burst"))
    desk.worker = worker
    wait_until(
        lambda: Job.objects.filter(pk=desk.job_id, status=JobStatus.RUNNING, progress_done=done).exists(),
        timeout=60,
        what="the job's progress",
    )


@then(parsers.parse('jobstatus shows the running job at "{words}" with its note'))
def in_jobstatus(desk: Desk, words: str) -> None:
    [line] = json.loads(jobstatus("--json"))["progress"]
    assert (line["job_id"], line["note"]) == (desk.job_id, desk.note)
    [row] = [row for row in jobstatus().splitlines() if row.split()[:1] == [str(desk.job_id)]]
    assert words in row
    assert desk.note in row


@then(parsers.parse('the job\'s admin page shows "{words}" with its note, escaped'))
def on_the_page(desk: Desk, admin_user: Any, words: str) -> None:
    html = job_page(admin_user, desk.job_id)
    assert words in html
    assert desk.note.replace("<", "&lt;").replace(">", "&gt;") in html
    assert desk.note not in html  # never as markup


@then(parsers.parse('the job list shows "{words}" under the job\'s status'))
def in_the_list(desk: Desk, admin_user: Any, words: str) -> None:
    html = page(admin_user, reverse("admin:django_jobretry_job_changelist"))
    assert f'title="{desk.note.replace("<", "&lt;").replace(">", "&gt;")}">{words}</span>' in html


@when("the job finishes")
def finishes(desk: Desk) -> None:
    Execution.objects.create(key=f"{KEY}:seen", attempt=0, pid=0)
    assert desk.worker is not None
    code, output = finish(desk.worker, timeout=60)
    assert code == 0, output


@then(parsers.parse('the job has succeeded and its page still shows "{words}"'))
def succeeded(desk: Desk, admin_user: Any, words: str) -> None:
    assert Job.objects.get(pk=desk.job_id).status == JobStatus.SUCCEEDED
    assert words in job_page(admin_user, desk.job_id)


@then("jobstatus shows no running job's progress")
def no_progress() -> None:
    assert json.loads(jobstatus("--json"))["progress"] == []
    assert "Progress" not in jobstatus()


@given(parsers.parse("a job that broke at row {row:d} of {total:d} has died under a worker"))
def died(desk: Desk, workers: list[subprocess.Popen[str]], row: int, total: int) -> None:
    desk.job_id = progress_jobs.breaks_at.enqueue("rows", row - 1, total).pk
    run_until_idle(workers)


@then(parsers.parse('its dead letter\'s page shows it got to "{words}", "{note}"'))
def dead_letter_page(desk: Desk, admin_user: Any, words: str, note: str) -> None:
    dead = DeadLetter.objects.get(job_id=desk.job_id)
    html = page(admin_user, reverse("admin:django_jobretry_deadletter_change", args=[dead.pk]))
    assert "Got to" in html
    assert f"{words} · {note}" in html


@then(parsers.parse('`deadletters show` says it got to "{words}"'))
def deadletters_show(desk: Desk, words: str) -> None:
    dead = DeadLetter.objects.get(job_id=desk.job_id)
    out = io.StringIO()
    call_command("deadletters", "show", str(dead.pk), stdout=out)
    assert f"got to:        {words}, at " in out.getvalue()
