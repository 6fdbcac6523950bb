"""The Pauses and Circuit breakers pages: pause from a form, resume, close, the right needed, the log kept."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.urls import reverse
from django.utils import timezone

from django_jobretry.models import Circuit, CircuitState, Job, Pause
from django_jobretry.services import circuits, holds, transitions
from tests.integration.conftest import Operator, messages_of
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db

ADD = reverse("admin:django_jobretry_pause_add")
PAUSES = reverse("admin:django_jobretry_pause_changelist")
BREAKERS = reverse("admin:django_jobretry_circuit_changelist")
JOBS = reverse("admin:django_jobretry_job_changelist")
#: What both users may see (the dead letters too: Operator takes its CSRF cookie from that list).
VIEWS = ("view_pause", "view_circuit", "view_job", "view_deadletter")


@pytest.fixture
def pauser(make_user: Any) -> Operator:
    return Operator(make_user("pause_work", *VIEWS, name="pauser"))


@pytest.fixture
def looker(make_user: Any) -> Operator:
    return Operator(make_user(*VIEWS, name="looker"))


def claimed() -> set[int]:
    taken = transitions.claim("test", 100, 60, None)
    transitions.release(taken)
    return {job.id for job in taken}


def test_a_pause_from_the_form_holds_the_queue_and_is_logged(pauser: Operator) -> None:
    held = jobs.other_queue.enqueue("k")
    free = jobs.record.enqueue("k")
    response = pauser.post(
        ADD, {"queue_name": "other", "task_name": "", "reason": "partner down"}, follow=True
    )
    assert response.status_code == 200
    row = Pause.objects.get()
    assert (row.queue_name, row.paused_by, row.reason) == ("other", "pauser", "partner down")
    assert claimed() == {free.id}
    entry = LogEntry.objects.get(object_id=str(row.pk))
    assert (entry.action_flag, entry.change_message) == (ADDITION, "Paused: partner down.")
    listing = pauser.get(PAUSES).content.decode()
    assert "queue other" in listing
    assert "partner down" in listing
    assert list(pauser.get(JOBS, {"held": "yes"}).context["cl"].result_list) == [Job.objects.get(pk=held.id)]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"queue_name": "a", "task_name": "b"}, "name exactly one queue or one task"),
        ({"queue_name": "", "task_name": ""}, "name exactly one queue or one task"),
        ({"queue_name": "a", "until_0": "2000-01-01", "until_1": "00:00"}, "has passed"),
    ],
)
def test_bad_input_is_a_form_error_and_nothing_is_stored(
    pauser: Operator, data: dict[str, str], error: str
) -> None:
    response = pauser.post(ADD, {"task_name": "", "reason": "", **data})
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not Pause.objects.exists()


def test_without_pause_work_there_is_no_form_and_no_action(looker: Operator) -> None:
    assert looker.post(ADD, {"queue_name": "other"}).status_code == 403
    holds.pause(queue="other", actor="alice")
    row = Pause.objects.get()
    response = looker.post(
        PAUSES, {"action": "resume_selected", "_selected_action": [str(row.pk)]}, follow=True
    )
    assert Pause.objects.filter(pk=row.pk).exists()
    assert "resume_selected" not in response.content.decode()


def test_resume_releases_and_is_logged(pauser: Operator) -> None:
    waiting = jobs.other_queue.enqueue("k")
    holds.pause(queue="other", actor="alice")
    row = Pause.objects.get()
    data = {"action": "resume_selected", "_selected_action": [str(row.pk)], "index": "0"}
    response = pauser.post(PAUSES, data, follow=True)
    assert messages_of(response) == ["Resumed: queue other (1 jobs released)."]
    assert not Pause.objects.exists()
    assert claimed() == {waiting.id}
    assert LogEntry.objects.get(object_id=str(row.pk)).action_flag == CHANGE


def test_close_now_closes_an_open_breaker(pauser: Operator, looker: Operator) -> None:
    waiting = jobs.record.enqueue("k")
    circuits.hold_task(jobs.record.name, timedelta(hours=1), None, job_id=0)
    assert claimed() == set()
    listing = looker.get(BREAKERS).content.decode()
    assert jobs.record.name in listing
    assert "close_selected" not in listing
    data = {"action": "close_selected", "_selected_action": [jobs.record.name], "index": "0"}
    response = pauser.post(BREAKERS, data, follow=True)
    assert messages_of(response) == [f"Closed: {jobs.record.name} (1 jobs released, 10 a second)."]
    assert Circuit.objects.get().state == CircuitState.CLOSED
    assert claimed() == {waiting.id}


def test_a_paused_jobs_page_says_why_it_waits(pauser: Operator) -> None:
    waiting = jobs.other_queue.enqueue("k")
    holds.pause(
        queue="other", actor="alice", reason="partner down", until=timezone.now() + timedelta(hours=1)
    )
    page = pauser.get(reverse("admin:django_jobretry_job_change", args=[waiting.id])).content.decode()
    assert "Held: queue other paused by alice (partner down)" in page


def test_the_dashboard_shows_what_is_held(pauser: Operator) -> None:
    dashboard = reverse("admin:django_jobretry_deadletter_dashboard")
    assert 'id="held"' not in pauser.get(dashboard).content.decode()
    jobs.other_queue.enqueue("k")
    holds.pause(queue="other", actor="alice", reason="partner down")
    circuits.hold_task(jobs.record.name, timedelta(hours=1), None, job_id=7)
    page = pauser.get(dashboard).content.decode()
    assert "Held: 1 paused, 1 circuit open" in page
    assert "paused by alice (partner down)" in page
    assert "job 7 raised CircuitOpen for 1h00m" in page
    assert f"{JOBS}?held=yes" in page
