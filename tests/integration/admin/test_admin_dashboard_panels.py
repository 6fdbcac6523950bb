"""The dashboard's Held, Schedules and Limits panels through Django's test client (issue 36).

What is held shows since when, to the second, and by whom; Resume and Close
are forms posting to the Pauses and Circuit breakers pages' own actions,
offered only to holders of ``pause_work`` and asking first. Every POST
carries the page's CSRF token with CSRF checks on (tests/integration/conftest.py).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from django_jobretry.admin import rendering
from django_jobretry.holds import breakers, pauses
from django_jobretry.jobs import claim
from django_jobretry.models import Circuit, CircuitState, Pause, Schedule
from tests.integration.conftest import Operator, hidden_inputs, messages_of
from tests.integration.schedules.schedule_story import story
from tests.jobs_app import jobs, limited_jobs

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("admin:django_jobretry_deadletter_dashboard")
PAUSES = reverse("admin:django_jobretry_pause_changelist")
BREAKERS = reverse("admin:django_jobretry_circuit_changelist")
VIEWS = ("view_deadletter", "view_job", "view_pause", "view_circuit")


@pytest.fixture
def pauser(make_user: Any) -> Operator:
    return Operator(make_user("pause_work", *VIEWS, name="pauser"))


@pytest.fixture
def looker(make_user: Any) -> Operator:
    return Operator(make_user(*VIEWS, name="looker"))


def held_story() -> tuple[Pause, Circuit]:
    jobs.other_queue.enqueue("k")
    jobs.record.enqueue("k")
    pauses.pause(queue="other", actor="alice", reason="partner down")
    breakers.hold_task(jobs.record.name, timedelta(hours=1), None, job_id=7)
    return Pause.objects.get(), Circuit.objects.get()


def panel(page: str, panel_id: str) -> str:
    """The HTML of the dashboard's section ``panel_id`` ("" when it is not shown)."""
    marker = f'id="{panel_id}"'
    if marker not in page:
        return ""
    start = page.index(marker)
    return page[start : page.index("</section>", start)]


class TestHeld:
    def test_each_hold_says_since_when_to_the_second_and_by_whom(self, pauser: Operator) -> None:
        pause, breaker = held_story()
        held = panel(pauser.get(DASHBOARD).content.decode(), "held")
        assert "Held: 1 paused, 1 circuit breaker open, 0 limits full" in held
        for moment in (pause.paused_at, breaker.opened_at):
            day, clock = rendering.time_text(moment).split(" ")
            assert (
                f'<span class="jobretry-date">{day}</span> <span class="jobretry-time">{clock}</span>' in held
            )
        assert "alice" in held
        assert "partner down" in held
        assert "job 7 raised CircuitOpen" in held
        assert "ago</span>" in held

    def test_the_buttons_post_to_the_actions_with_the_csrf_token(self, pauser: Operator) -> None:
        pause, _ = held_story()
        held = panel(pauser.get(DASHBOARD).content.decode(), "held")
        assert held.count('<form method="post"') == 2
        assert f'action="{PAUSES}"' in held
        assert f'action="{BREAKERS}"' in held
        assert held.count('name="csrfmiddlewaretoken"') == 2
        assert f'name="_selected_action" value="{pause.pk}"' in held
        assert f'name="_selected_action" value="{jobs.record.name}"' in held
        assert 'value="resume_selected"' in held
        assert 'value="close_selected"' in held

    def test_without_pause_work_there_is_no_button(self, looker: Operator) -> None:
        held_story()
        held = panel(looker.get(DASHBOARD).content.decode(), "held")
        assert "alice" in held  # what is held is shown
        assert "<form" not in held
        assert "resume_selected" not in held

    def test_a_button_needs_the_view_permission_of_its_page_too(self, make_user: Any) -> None:
        held_story()
        closer = Operator(make_user("pause_work", "view_deadletter", "view_circuit", name="closer"))
        held = panel(closer.get(DASHBOARD).content.decode(), "held")
        assert 'value="close_selected"' in held
        assert "resume_selected" not in held  # the Pauses page would refuse it

    def test_resume_from_the_dashboard_asks_first(self, pauser: Operator) -> None:
        pause, _ = held_story()
        data = {"action": "resume_selected", "_selected_action": [str(pause.pk)]}  # the button's form
        asked = pauser.post(PAUSES, data)
        page = asked.content.decode()
        assert asked.status_code == 200
        assert "Resume 1 pause, releasing 1 due job?" in page
        assert "partner down" in page
        assert Pause.objects.filter(pk=pause.pk).exists()
        done = pauser.post(PAUSES, hidden_inputs(page), follow=True)
        assert messages_of(done) == ["Resumed: queue other (1 job released)."]
        assert not Pause.objects.exists()

    def test_close_from_the_dashboard_asks_first(self, pauser: Operator) -> None:
        held_story()
        asked = pauser.post(BREAKERS, {"action": "close_selected", "_selected_action": [jobs.record.name]})
        assert "Close 1 breaker, releasing 1 due job?" in asked.content.decode()
        assert Circuit.objects.get().state == CircuitState.OPEN
        done = pauser.post(BREAKERS, hidden_inputs(asked.content.decode()), follow=True)
        assert messages_of(done) == [f"Closed: {jobs.record.name} (1 job released, 10 a second)."]
        assert Circuit.objects.get().state == CircuitState.CLOSED

    def test_a_forged_post_without_pause_work_changes_nothing(self, looker: Operator) -> None:
        pause, _ = held_story()
        for url, action, value in (
            (PAUSES, "resume_selected", pause.pk),
            (BREAKERS, "close_selected", jobs.record.name),
        ):
            response = looker.post(
                url, {"action": action, "_selected_action": [str(value)], "post": "yes"}, follow=True
            )
            assert response.status_code == 200
            assert "Are you sure?" not in response.content.decode()
        assert Pause.objects.filter(pk=pause.pk).exists()
        assert Circuit.objects.get().state == CircuitState.OPEN

    def test_without_the_csrf_token_nothing_happens(self, pauser: Operator) -> None:
        pause, _ = held_story()
        data = {"action": "resume_selected", "_selected_action": [str(pause.pk)], "post": "yes"}
        assert pauser.post(PAUSES, data, token=False).status_code == 403
        assert Pause.objects.filter(pk=pause.pk).exists()

    def test_a_full_limit_is_held_since_its_oldest_waiting_job(self, pauser: Operator) -> None:
        limited_jobs.one_per_tenant.bulk_enqueue([((tenant, 0), {}) for tenant in (1, 1, 2)])
        limits = {
            "tasks": {limited_jobs.one_per_tenant.name: {"c": 1, "k": True, "r": None, "b": None}},
            "queues": {},
        }
        claim.claim_limited("w", 10, 30, None, limits)
        held = panel(pauser.get(DASHBOARD).content.decode(), "held")
        assert "0 paused, 0 circuit breakers open, 1 limit full" in held
        assert f"task {limited_jobs.one_per_tenant.name}" in held
        assert "at its limit" in held
        assert "1 at once per key" in held


class TestSchedules:
    def test_late_failing_and_paused_are_listed_the_others_not(self, settings: Any, make_user: Any) -> None:
        story(settings)
        Schedule.objects.filter(name="tick").update(next_slot=timezone.now() - timedelta(minutes=10))
        viewer = Operator(make_user("view_deadletter", "view_schedule", name="viewer"))
        schedules = panel(viewer.get(DASHBOARD).content.decode(), "schedules")
        assert "Schedules: 3 of 4 late, failing or paused" in schedules
        assert "late: its due slot has not been run" in schedules  # tick
        assert "failing" in schedules  # nightly: its run died
        assert "by alice since" in schedules  # hourly
        assert "partner maintenance until 06:00" in schedules
        assert "retired" not in schedules  # not declared: nothing runs it, nothing to do here
        assert reverse("admin:django_jobretry_schedule_change", args=["nightly"]) in schedules

    def test_shown_only_to_who_may_view_schedules(self, settings: Any, looker: Operator) -> None:
        story(settings)
        assert 'id="schedules"' not in looker.get(DASHBOARD).content.decode()


class TestLimits:
    LIMITS = {
        "tasks": {limited_jobs.one_per_tenant.name: {"c": 1, "k": True, "r": None, "b": None}},
        "queues": {},
    }

    def full(self) -> None:
        limited_jobs.one_per_tenant.bulk_enqueue([((tenant, 0), {}) for tenant in (1, 1, 1, 2)])
        claim.claim_limited("w", 10, 30, None, self.LIMITS)

    def test_keys_at_their_limit_and_jobs_waiting(self, looker: Operator) -> None:
        self.full()
        limits = panel(looker.get(DASHBOARD).content.decode(), "limits")
        assert "Limits: 1 full, 2 due jobs waiting" in limits
        row = limits[limits.index(limited_jobs.one_per_tenant.name) :]
        row = row[: row.index("</tr>")]
        assert "at its limit" in row
        assert '<td class="num">2 of 2</td>' in row  # both running keys are at their limit
        assert "1 key" in row
        assert "tenant:1" not in limits  # keys are made of arguments

    def test_keys_are_named_to_who_may_see_arguments(self, make_user: Any) -> None:
        self.full()
        reader = Operator(make_user("view_deadletter", "view_job_payload", name="reader"))
        assert "tenant:1 (2)" in panel(reader.get(DASHBOARD).content.decode(), "limits")
