"""One pause, one number: `pause`, `jobstatus`, the dashboard and the Pauses page agree (issue 36).

`pause` once counted every job held by anything on its queue - the jobs
parked behind the task's breaker until its end included - while the Held
table counted the due ones the pause holds; an operator saw 35 and 6.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse

from django_jobretry.holds import breakers
from django_jobretry.jobs import claim
from django_jobretry.models import Job, JobStatus
from tests.integration.conftest import Operator, run_command
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("admin:django_jobretry_deadletter_dashboard")
PAUSES = reverse("admin:django_jobretry_pause_changelist")
BREAKERS = reverse("admin:django_jobretry_circuit_changelist")


def outage() -> None:
    """Queue "other": one job running, two due, one due in 30 minutes; its task's breaker open for an hour."""
    jobs.other_queue.enqueue("running")
    [running] = claim.claim("test", 1, 60, ["other"])
    jobs.other_queue.enqueue("due 1")
    jobs.other_queue.enqueue("due 2")
    jobs.other_queue.using(run_after=timedelta(minutes=30)).enqueue("later")
    breakers.hold_task(jobs.other_queue.name, timedelta(hours=1), None, job_id=running.id)
    assert Job.objects.get(pk=running.id).status == JobStatus.RUNNING


def test_every_place_counts_the_due_jobs_a_pause_holds(make_user: Any) -> None:
    outage()
    said = run_command("pause", "--queue", "other", "--actor", "alice").splitlines()[1]
    assert said.startswith("2 due job(s) of queue other held"), said
    text = run_command("jobstatus")
    [line] = [row for row in text.splitlines() if row.startswith("queue other")]
    assert line.split()[-1] == "2"
    [pause] = json.loads(run_command("jobstatus", "--json"))["held"]["pauses"]
    assert pause["held"] == 2
    operator = Operator(make_user("view_pause", "view_job", "view_deadletter", "view_circuit", name="ops"))
    [row] = [row for row in operator.get(DASHBOARD).context["held"]["rows"] if row.kind == "pause"]
    assert row.held == 2
    listing = operator.get(PAUSES).content.decode()
    assert re.findall(r'<td class="field-held_jobs">(\d+)</td>', listing) == ["2"]


def test_every_place_counts_the_jobs_a_breaker_holds_due_and_parked(make_user: Any) -> None:
    outage()
    [breaker] = json.loads(run_command("jobstatus", "--json"))["held"]["circuits"]
    assert breaker["held"] == 3  # two due, one parked at its end; never the running one
    operator = Operator(make_user("view_circuit", "view_job", "view_deadletter", "view_pause", name="ops"))
    [row] = [row for row in operator.get(DASHBOARD).context["held"]["rows"] if row.kind == "breaker"]
    assert row.held == 3
    listing = operator.get(BREAKERS).content.decode()
    assert re.findall(r'<td class="field-held_jobs">(\d+)</td>', listing) == ["3"]
