"""The Pauses and Circuit breakers pages: pause from a form, resume, close, the right needed, the log kept."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.urls import reverse
from django.utils import timezone

from django_jobretry.holds import breakers, pauses
from django_jobretry.jobs import claim
from django_jobretry.jobs.claimed import release
from django_jobretry.models import Circuit, CircuitState, Job, Pause
from tests.integration.conftest import Operator, hidden_inputs, messages_of
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
    taken = claim.claim("test", 100, 60, None)
    release(taken)
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
        ({"queue_name": "a", "until_0": "9999-12-31", "until_1": "23:59"}, "is out of range"),
        ({"queue_name": "a\x00b"}, "Null characters are not allowed"),
    ],
)
def test_bad_input_is_a_form_error_and_nothing_is_stored(
    pauser: Operator, data: dict[str, str], error: str
) -> None:
    response = pauser.post(ADD, {"task_name": "", "reason": "", **data})
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not Pause.objects.exists()


def test_a_misspelt_name_is_a_form_error_with_the_close_name(pauser: Operator) -> None:
    typo = jobs.record.name[:-1]  # "...recor"
    response = pauser.post(ADD, {"queue_name": "", "task_name": typo, "reason": "partner down"})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {
        "task_name": [
            f"task {typo!r} is not declared and no job has it, so its pause would hold nothing. "
            f"Did you mean {jobs.record.name!r}? Tick “Not deployed yet” to pause it before it is deployed."
        ]
    }
    queue = pauser.post(ADD, {"queue_name": "othr", "task_name": ""})
    assert "Did you mean &#x27;other&#x27;?" in queue.content.decode()
    assert not Pause.objects.exists()
    assert not LogEntry.objects.exists()


def test_not_deployed_yet_pauses_a_name_nothing_knows(pauser: Operator) -> None:
    data = {"queue_name": "", "task_name": "billing.sync_invoices", "undeployed": "on"}
    response = pauser.post(ADD, data, follow=True)
    assert response.status_code == 200
    assert Pause.objects.get().task_name == "billing.sync_invoices"
    assert "Not deployed yet" in pauser.get(ADD).content.decode()


def test_without_pause_work_there_is_no_form_and_no_action(looker: Operator) -> None:
    assert looker.post(ADD, {"queue_name": "other"}).status_code == 403
    pauses.pause(queue="other", actor="alice")
    row = Pause.objects.get()
    response = looker.post(
        PAUSES, {"action": "resume_selected", "_selected_action": [str(row.pk)]}, follow=True
    )
    assert Pause.objects.filter(pk=row.pk).exists()
    assert "resume_selected" not in response.content.decode()


def test_resume_releases_and_is_logged(pauser: Operator) -> None:
    waiting = {jobs.other_queue.enqueue("k").id, jobs.other_queue.enqueue("l").id}
    pauses.pause(queue="other", actor="alice")
    row = Pause.objects.get()
    data = {"action": "resume_selected", "_selected_action": [str(row.pk)], "index": "0"}
    asked = pauser.post(PAUSES, data)
    assert "Resume 1 pause, releasing 2 due jobs?" in asked.content.decode()
    assert Pause.objects.filter(pk=row.pk).exists()  # asking changed nothing
    response = pauser.post(PAUSES, hidden_inputs(asked.content.decode()), follow=True)
    assert messages_of(response) == ["Resumed: queue other (2 jobs released)."]
    assert not Pause.objects.exists()
    assert claimed() == waiting
    assert LogEntry.objects.get(object_id=str(row.pk)).action_flag == CHANGE


def test_close_now_closes_an_open_breaker(pauser: Operator, looker: Operator) -> None:
    waiting = jobs.record.enqueue("k")
    breakers.hold_task(jobs.record.name, timedelta(hours=1), None, job_id=0)
    assert claimed() == set()
    listing = looker.get(BREAKERS).content.decode()
    assert jobs.record.name in listing
    assert "close_selected" not in listing
    data = {"action": "close_selected", "_selected_action": [jobs.record.name], "index": "0"}
    asked = pauser.post(BREAKERS, data)
    assert "Close 1 breaker, releasing 1 due job?" in asked.content.decode()
    assert Circuit.objects.get().state == CircuitState.OPEN
    response = pauser.post(BREAKERS, hidden_inputs(asked.content.decode()), follow=True)
    assert messages_of(response) == [f"Closed: {jobs.record.name} (1 job released, 10 a second)."]
    assert Circuit.objects.get().state == CircuitState.CLOSED
    assert claimed() == {waiting.id}


def test_a_paused_jobs_page_says_why_it_waits(pauser: Operator) -> None:
    waiting = jobs.other_queue.enqueue("k")
    pauses.pause(
        queue="other", actor="alice", reason="partner down", until=timezone.now() + timedelta(hours=1)
    )
    page = pauser.get(reverse("admin:django_jobretry_job_change", args=[waiting.id])).content.decode()
    assert "Held: queue other paused by alice (partner down)" in page


def test_the_dashboard_shows_what_is_held(pauser: Operator) -> None:
    dashboard = reverse("admin:django_jobretry_deadletter_dashboard")
    assert 'id="held"' not in pauser.get(dashboard).content.decode()
    jobs.other_queue.enqueue("k")
    pauses.pause(queue="other", actor="alice", reason="partner down")
    breakers.hold_task(jobs.record.name, timedelta(hours=1), None, job_id=7)
    page = pauser.get(dashboard).content.decode()
    assert "Held: 1 paused, 1 circuit breaker open, 0 limits full" in page
    assert "partner down" in page
    assert "job 7 raised CircuitOpen for 1h00m" in page
    assert f"{JOBS}?held=yes" in page


#: Primary keys no row can have: PostgreSQL refuses NUL in text, so Django's lookup fails in the database.
NO_KEYS = ["a\x00b", "\x00", "x" * 10_000]


@pytest.mark.parametrize("who", ["pauser", "looker", "superuser"])
@pytest.mark.parametrize("page", ["change", "history", "delete"])
@pytest.mark.parametrize("model", ["circuit", "schedule"])
def test_a_name_no_row_can_have_in_the_url_is_not_found(
    request: pytest.FixtureRequest, who: str, page: str, model: str
) -> None:
    """A breaker's (or a schedule's) key is its name: one holding NUL is no row's, not a server error."""
    operator: Operator = request.getfixturevalue(who)
    breakers.hold_task(jobs.record.name, timedelta(hours=1), None, job_id=0)
    for key in NO_KEYS:
        response = operator.get(reverse(f"admin:django_jobretry_{model}_{page}", args=[key]), follow=True)
        assert response.status_code in {200, 403}, (key[:20], response.status_code)
        if response.status_code == 200:
            assert response.redirect_chain[-1][0] == reverse("admin:index")
            assert "exist. Perhaps it was deleted?" in " ".join(messages_of(response))
    assert Circuit.objects.get().state == CircuitState.OPEN


def test_close_now_ignores_a_selected_name_no_row_can_have(pauser: Operator) -> None:
    breakers.hold_task(jobs.record.name, timedelta(hours=1), None, job_id=0)
    data = {"action": "close_selected", "_selected_action": ["a\x00b"], "index": "0"}
    response = pauser.post(BREAKERS, data, follow=True)
    assert response.status_code == 200
    assert Circuit.objects.get().state == CircuitState.OPEN


@pytest.mark.parametrize("who", ["looker", "superuser"])
def test_a_breaker_filter_holding_nul_is_refused(request: pytest.FixtureRequest, who: str) -> None:
    operator: Operator = request.getfixturevalue(who)
    assert operator.get(BREAKERS, {"state__exact": "open\x00"}).status_code == 400
    assert operator.get(BREAKERS, {"state__exact": "open"}).status_code == 200
