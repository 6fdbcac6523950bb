"""The schedules page through Django's test client: the columns, the arguments' right, the three actions.

The schedules are in the states of tests/integration/schedules/schedule_story.py,
reached through the real services. Users are staff accounts with exactly
the permissions a test names; every POST carries the page's CSRF token with
CSRF checks on (tests/integration/conftest.py). A refusal is checked on the
rows: nothing paused, resumed or run.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from django_jobretry.admin.rendering import PAYLOAD_PERMISSION_NAME
from django_jobretry.models import Job, Schedule
from django_jobretry.schedules.status import utc, zoned
from tests.factories import ScheduleFactory
from tests.integration.conftest import Operator, messages_of
from tests.integration.schedules.schedule_admin import LIST, VIEW, act, confirm, detail, operator, rows_of
from tests.integration.schedules.schedule_story import PAUSE_REASON, SECRET, Story, story

pytestmark = pytest.mark.django_db


def moment(text: str) -> str:
    """A time as the list marks it up: it may wrap between the date and the time, never inside."""
    day, _, clock = text.partition(" ")
    return f'<span class="jobretry-date">{day}</span> <span class="jobretry-time">{clock}</span>'


@pytest.fixture
def told(settings: Any) -> Story:
    return story(settings)


class TestList:
    def test_every_column_of_every_state(self, told: Story, make_user: Any) -> None:
        ops = operator(make_user, VIEW, "view_job", "view_deadletter")
        page = ops.get(LIST)
        rows = rows_of(page.text)
        assert list(rows) == ["hourly", "nightly", "retired", "tick"]
        nightly, tick = told.row("nightly"), told.row("tick")
        # The next run in the schedule's zone, and in UTC.
        assert zoned(nightly.next_slot, "Europe/Berlin").endswith(" CET")
        assert f"{moment(zoned(nightly.next_slot, 'Europe/Berlin'))}<span" in rows["nightly"]
        assert f'<span class="jobretry-quiet">{moment(utc(nightly.next_slot))}</span>' in rows["nightly"]
        # An interval's zone is UTC: shown once.
        assert f'<td class="field-next_run">{moment(utc(tick.next_slot))}</td>' in rows["tick"]
        # The last run: a dead one links to its dead letter, a finished one to its job.
        dead_url = reverse("admin:django_jobretry_deadletter_change", args=[told.dead_letter_id])
        assert f'<a href="{dead_url}">dead letter {told.dead_letter_id}</a>: dead (fatal)' in rows["nightly"]
        job_url = reverse("admin:django_jobretry_job_change", args=[told.succeeded_job_id])
        assert f'<a href="{job_url}">job {told.succeeded_job_id}</a>: succeeded' in rows["tick"]
        assert "no run yet" in rows["hourly"]
        # The last success and how long ago; the counts.
        assert "never" in rows["nightly"]
        assert " ago</span>" in rows["tick"]
        assert "1 / 0 / 0 / 0" in rows["tick"]
        # The pause: by whom, why.
        assert "paused</span> by alice" in rows["hourly"]
        assert PAUSE_REASON in rows["hourly"]
        assert "slots due meanwhile are decided at the resume" in rows["hourly"]
        # A row no declaration names.
        assert [name for name, row in rows.items() if "not declared in this deploy" in row] == ["retired"]
        assert SECRET not in page.text

    def test_links_only_to_what_the_user_may_open(self, told: Story, make_user: Any) -> None:
        rows = rows_of(operator(make_user, VIEW).get(LIST).text)
        assert f"dead letter {told.dead_letter_id}: dead (fatal)" in rows["nightly"]
        assert f"job {told.succeeded_job_id}: succeeded" in rows["tick"]
        assert "/admin/django_jobretry/job/" not in rows["tick"]
        assert "/admin/django_jobretry/deadletter/" not in rows["nightly"]

    def test_a_due_slot_and_a_cadence_this_deploy_changed_say_so(
        self, told: Story, superuser: Operator
    ) -> None:
        Schedule.objects.filter(name="tick").update(next_slot=told.row("tick").next_slot - timedelta(hours=1))
        Schedule.objects.filter(name="nightly").update(cadence="cron 0 4 * * * Europe/Berlin")
        rows = rows_of(superuser.get(LIST).text)
        assert "due: the next look of a worker runs it" in rows["tick"]
        assert "this deploy: cron 0 3 * * * Europe/Berlin, once one of its workers starts" in rows["nightly"]
        assert "due:" not in rows["nightly"]

    def test_names_and_reasons_are_text_not_html(self, told: Story, superuser: Operator) -> None:
        Schedule.objects.filter(name="hourly").update(pause_reason="<script>alert(1)</script>")
        page = superuser.get(LIST).text
        assert "<script>alert(1)</script>" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rows_of(page)["hourly"]

    def test_the_page_costs_the_same_queries_whatever_the_number_of_schedules(
        self, told: Story, superuser: Operator
    ) -> None:
        def queries() -> int:
            with CaptureQueriesContext(connection) as captured:
                assert superuser.get(LIST).status_code == 200
            return len(captured.captured_queries)

        few = queries()
        ScheduleFactory.create_batch(20, last_job_id=told.succeeded_job_id)
        assert queries() == few

    def test_the_state_filter(self, told: Story, make_user: Any) -> None:
        ops = operator(make_user, VIEW)
        assert list(rows_of(ops.get(LIST, {"state": "paused"}).text)) == ["hourly"]
        assert list(rows_of(ops.get(LIST, {"state": "undeclared"}).text)) == ["retired"]
        assert list(rows_of(ops.get(LIST, {"state": "active"}).text)) == ["nightly", "tick"]

    def test_nothing_can_be_added_changed_or_deleted(self, told: Story, superuser: Operator) -> None:
        assert superuser.get(reverse("admin:django_jobretry_schedule_add")).status_code == 403
        page = superuser.get(detail("tick"))
        assert page.status_code == 200
        assert 'name="_save"' not in page.text
        delete = superuser.post(
            reverse("admin:django_jobretry_schedule_delete", args=["tick"]), {"post": "yes"}
        )
        assert delete.status_code == 403
        assert Schedule.objects.filter(name="tick").exists()

    def test_requests_that_cannot_be_a_schedule_are_refused_cleanly(
        self, told: Story, superuser: Operator
    ) -> None:
        assert superuser.get(LIST, {"task_name": "tests.jobs_app.jobs.record"}).status_code == 400
        assert superuser.get(LIST, {"state": "paused\x00"}).status_code == 400
        assert superuser.get(detail("a\x00b")).status_code == 302  # Django's "doesn't exist" redirect
        assert superuser.get(detail("x" * 300)).status_code == 302
        response = act(superuser, "pause_selected", ["tick\x00"], post="yes")
        assert messages_of(response) == ["A selected name holds a NUL character: nothing was done."]


class TestArguments:
    def test_hidden_without_view_job_payload(self, told: Story, make_user: Any) -> None:
        page = operator(make_user, VIEW).get(detail("nightly"))
        assert page.status_code == 200
        assert SECRET not in page.text
        assert f"hidden (needs the '{PAYLOAD_PERMISSION_NAME}' permission)" in page.text

    def test_shown_with_view_job_payload(self, told: Story, make_user: Any) -> None:
        page = operator(make_user, VIEW, "view_job_payload").get(detail("nightly"))
        assert SECRET in page.text
        assert "overlap skip; catch_up latest" in page.text

    def test_a_row_no_deploy_declares_says_nothing_runs_it(self, told: Story, superuser: Operator) -> None:
        page = superuser.get(detail("retired"))
        assert "not declared in this deploy: nothing runs it" in page.text


class TestPauseAndResume:
    def test_pause_asks_then_pauses_with_the_reason_and_logs_it(self, told: Story, make_user: Any) -> None:
        ops = operator(make_user, VIEW, "pause_schedule")
        page = act(ops, "pause_selected", ["tick"])
        assert "Pause 1 schedule?" in page.text
        assert 'name="jobretry_reason"' in page.text
        assert told.row("tick").paused_at is None  # nothing paused yet
        response = confirm(ops, page, jobretry_reason="disk full on the partner")
        assert messages_of(response) == ["Paused: tick."]
        row = told.row("tick")
        assert (row.paused_by, row.pause_reason) == ("operator", "disk full on the partner")
        [entry] = LogEntry.objects.filter(user=ops.user)
        assert (entry.action_flag, entry.object_id, entry.get_change_message()) == (
            CHANGE,
            "tick",
            "Paused: disk full on the partner.",
        )
        assert entry.object_repr == "Schedule tick paused"

    def test_already_paused_and_not_declared_are_reported_not_raised(
        self, told: Story, make_user: Any
    ) -> None:
        ops = operator(make_user, VIEW, "pause_schedule")
        page = act(ops, "pause_selected", ["hourly", "retired"])
        assert "not declared in this deploy: nothing will be done" in page.text
        response = confirm(ops, page)
        assert messages_of(response) == [
            "retired: no schedule 'retired' is declared in this process.",
            "Nothing to do, paused already: hourly.",
        ]
        assert told.row("hourly").pause_reason == PAUSE_REASON
        assert told.row("retired").paused_at is None
        assert not LogEntry.objects.exists()

    def test_a_reason_too_long_asks_again_and_pauses_nothing(self, told: Story, make_user: Any) -> None:
        ops = operator(make_user, VIEW, "pause_schedule")
        page = act(ops, "pause_selected", ["tick"])
        again = confirm(ops, page, jobretry_reason="x" * 501)
        assert "The reason is 501 characters long; at most 500 are kept. Nothing was paused." in again.text
        assert told.row("tick").paused_at is None

    def test_resume(self, told: Story, make_user: Any) -> None:
        ops = operator(make_user, VIEW, "pause_schedule")
        page = act(ops, "resume_selected", ["hourly", "tick"])
        assert "Resume 2 schedules?" in page.text
        response = confirm(ops, page)
        assert messages_of(response) == ["Resumed: hourly.", "Nothing to do, not paused: tick."]
        row = told.row("hourly")
        assert (row.paused_at, row.paused_by, row.pause_reason) == (None, "", "")
        [entry] = LogEntry.objects.filter(user=ops.user)
        assert (entry.object_id, entry.get_change_message()) == ("hourly", "Resumed.")


class TestRunNow:
    def test_run_now_makes_a_job_and_logs_both(self, told: Story, make_user: Any) -> None:
        ops = operator(make_user, VIEW, "run_schedule")
        page = act(ops, "run_selected", ["tick"])
        assert "Run 1 schedule now?" in page.text
        response = confirm(ops, page)
        job = Job.objects.get(schedule_name="tick", status="ready")
        assert messages_of(response) == [f"Run now: tick as job {job.pk}."]
        assert told.row("tick").last_job_id == job.pk
        entries = LogEntry.objects.filter(user=ops.user)
        assert sorted((e.action_flag, e.object_id, e.get_change_message()) for e in entries) == [
            (ADDITION, str(job.pk), "Run now of schedule tick."),
            (CHANGE, "tick", f"Run now as job {job.pk}."),
        ]

    def test_a_run_the_overlap_refuses_is_an_error_message(self, told: Story, superuser: Operator) -> None:
        confirm(superuser, act(superuser, "run_selected", ["tick"]))
        live = Job.objects.get(schedule_name="tick", status="ready")
        response = confirm(superuser, act(superuser, "run_selected", ["tick", "retired"]))
        assert response.status_code == 200
        assert messages_of(response) == [
            "retired: no schedule 'retired' is declared in this process.",
            f"tick: schedule 'tick' has a run still ready, running or retrying (job {live.pk})",
        ]
        assert Job.objects.filter(schedule_name="tick", status="ready").count() == 1


class TestPermissions:
    def test_a_viewer_is_offered_no_action_and_a_forged_one_does_nothing(
        self, told: Story, make_user: Any
    ) -> None:
        ops = operator(make_user, VIEW)
        page = ops.get(LIST)
        for action in ("pause_selected", "resume_selected", "run_selected"):
            assert f'value="{action}"' not in page.text
        # With no action to offer, Django's list ignores a posted one: the list again, nothing done.
        for action, names in (("pause_selected", ["tick"]), ("resume_selected", ["hourly"])):
            forged = act(ops, action, names, post="yes", jobretry_reason="forged")
            assert (forged.status_code, messages_of(forged)) == (200, [])
        forged = act(ops, "run_selected", ["tick"], post="yes")
        assert (forged.status_code, messages_of(forged)) == (200, [])
        assert told.row("tick").paused_at is None
        assert told.row("hourly").paused_at is not None
        assert not Job.objects.filter(schedule_name="tick", status="ready").exists()

    def test_each_action_needs_its_own_permission(self, told: Story, make_user: Any) -> None:
        pauser = Operator(make_user(VIEW, "pause_schedule", name="pauser"))
        page = pauser.get(LIST).text
        assert 'value="pause_selected"' in page
        assert 'value="resume_selected"' in page
        assert 'value="run_selected"' not in page
        assert messages_of(act(pauser, "run_selected", ["tick"], post="yes")) == ["No action selected."]
        runner = Operator(make_user(VIEW, "run_schedule", name="runner"))
        page = runner.get(LIST).text
        assert 'value="run_selected"' in page
        assert 'value="pause_selected"' not in page
        assert messages_of(act(runner, "pause_selected", ["tick"], post="yes")) == ["No action selected."]
        assert told.row("tick").paused_at is None
        assert not Job.objects.filter(schedule_name="tick", status="ready").exists()

    def test_the_action_itself_refuses_without_the_right(self, told: Story, make_user: Any) -> None:
        """Defence in depth: the action checks the right again, were Django's check ever bypassed."""
        model_admin = admin.site._registry[Schedule]
        request = RequestFactory().post(LIST, {"post": "yes"})
        request.user = make_user(VIEW)
        with pytest.raises(PermissionDenied):
            model_admin.pause_selected(request, Schedule.objects.filter(name="tick"))  # type: ignore[attr-defined]
        assert told.row("tick").paused_at is None

    def test_without_the_csrf_token_nothing_happens(self, told: Story, superuser: Operator) -> None:
        data = {"action": "pause_selected", "_selected_action": ["tick"], "post": "yes"}
        assert superuser.post(LIST, data, token=False).status_code == 403
        assert told.row("tick").paused_at is None
